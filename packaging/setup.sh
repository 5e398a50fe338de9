#!/usr/bin/env bash
# Set-up script of the NetPerfMeter tool-chain for Debian 12 (run as root).
#
#   packaging/setup.sh deps    install the missing Debian packages (build, tests, plots)
#   packaging/setup.sh build   deps + configure and build into ./build
#   packaging/setup.sh demo    build + a loopback measurement against a local passive
#   packaging/setup.sh test    build + the whole test suite (ctest)
#   packaging/setup.sh bench   build + the benchmarks in tests/bench
#
# Environment: BUILD_DIR (default ./build), JOBS (default: number of cores).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=${BUILD_DIR:-$here/build}
jobs=${JOBS:-$(nproc)}

# Everything the build, the tests, the plots, the dissector and the BPF modules need.
packages=(
  build-essential cmake ninja-build pkg-config git
  libboost-dev libbz2-dev bzip2 catch2
  libsctp-dev lksctp-tools libusrsctp-dev
  iproute2 iperf3 tshark python3 util-linux procps
  libwireshark-dev libglib2.0-dev
  r-base-core r-cran-ggplot2 r-cran-data.table r-cran-testthat poppler-utils groff
  clang llvm libbpf-dev bpftool
)

log() { printf '[setup] %s\n' "$*" >&2; }

install_deps() {
  local missing=()
  for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if ((${#missing[@]} == 0)); then
    log "all ${#packages[@]} packages present"
    return
  fi
  if [[ $(id -u) -ne 0 ]]; then
    log "missing packages: ${missing[*]} (run as root to install them)"
    exit 1
  fi
  log "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  # tshark asks whether non-root users may capture; answer it up front.
  echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

build() {
  install_deps
  cmake -S "$here" -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  cmake --build "$build_dir" -j "$jobs"
}

case "${1:-}" in
  deps)  install_deps ;;
  build) build ;;
  demo)  build; exec "$here/packaging/demo.sh" "$build_dir" ;;
  test)
    build
    cd "$build_dir"
    exec ctest --output-on-failure --timeout 900 -j1
    ;;
  bench) build; exec "$here/tests/bench/run-all.sh" "$build_dir" ;;
  *) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 1 ;;
esac
