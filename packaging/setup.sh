#!/usr/bin/env bash
# Set-up script of the NetPerfMeter tool-chain for Debian 12 (run as root).
#
#   packaging/setup.sh deps    install the missing Debian packages (build, tests, plots)
#   packaging/setup.sh build   deps + configure and build into ./build
#   packaging/setup.sh demo    build + a loopback measurement against a local passive
#   packaging/setup.sh test    build + the whole test suite (ctest), its "sanitize" tests
#                              again under ASan+UBSan, its "tsan" tests under TSan
#   packaging/setup.sh bench   build + the benchmarks in tests/bench
#
# Environment: BUILD_DIR (default ./build), SANITIZE_DIR and TSAN_DIR (default
# BUILD_DIR-sanitize, BUILD_DIR-tsan), JOBS (default: number of cores).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=${BUILD_DIR:-$here/build}
sanitize_dir=${SANITIZE_DIR:-$build_dir-sanitize}
tsan_dir=${TSAN_DIR:-$build_dir-tsan}
jobs=${JOBS:-$(nproc)}

# Everything the build, the tests, the plots, the dissector and the BPF modules need.
packages=(
  build-essential cmake ninja-build pkg-config git
  libboost-dev libbz2-dev bzip2 catch2
  libsctp-dev lksctp-tools libusrsctp-dev
  iproute2 iperf3 tshark python3 util-linux procps
  libwireshark-dev libglib2.0-dev
  r-base-core r-cran-ggplot2 r-cran-data.table r-cran-r.utils r-cran-testthat poppler-utils groff
  clang llvm libbpf-dev bpftool
  qemu-system-x86 linux-image-amd64 initramfs-tools
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
    # The same tests once more in an ASan+UBSan build, where reading freed memory or
    # overflowing a buffer fails the test instead of passing unnoticed (label "sanitize").
    cmake -S "$here" -B "$sanitize_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DNPM_SANITIZE=address,undefined -DNPM_WITH_DISSECTORS=OFF -DNPM_WITH_BPF_CC=OFF -DNPM_WITH_RPLOT=OFF >/dev/null
    cmake --build "$sanitize_dir" -j "$jobs"
    # And the userland SCTP paths (usrsctp's threads, the upcall into Asio) under TSan.
    cmake -S "$here" -B "$tsan_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DNPM_SANITIZE=thread -DNPM_WITH_DISSECTORS=OFF -DNPM_WITH_BPF_CC=OFF -DNPM_WITH_RPLOT=OFF >/dev/null
    cmake --build "$tsan_dir" -j "$jobs" --target netperfmeter
    status=0
    (cd "$build_dir" && ctest --output-on-failure --timeout 900 -j1) || status=1
    (cd "$sanitize_dir" && ctest --output-on-failure --timeout 900 -j1 -L sanitize) || status=1
    (cd "$tsan_dir" && TSAN_OPTIONS=halt_on_error=1 ctest --output-on-failure --timeout 900 -j1 -L tsan) || status=1
    exit $status
    ;;
  bench) build; exec "$here/tests/bench/run-all.sh" "$build_dir" ;;
  *) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 1 ;;
esac
