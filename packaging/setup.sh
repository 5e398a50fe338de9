#!/usr/bin/env bash
# Set-up script of the NetPerfMeter tool-chain for Debian 12 (run as root).
#
#   packaging/setup.sh deps    install the missing Debian packages (build, tests, plots): the
#                              Build-Depends of packaging/debian/control; and a deb-src entry
#                              for the release, from which the bundled usrsctp is built
#   packaging/setup.sh build   deps + configure and build into ./build
#   packaging/setup.sh demo    build + a loopback measurement against a local passive
#   packaging/setup.sh test    build + the gating test suite (ctest without the labels long,
#                              packages, fresh-root), its "sanitize" tests again under
#                              ASan+UBSan, its "tsan" tests under TSan (tests/README.md): first
#                              the tests that may run beside others (BESIDE_JOBS at a time,
#                              default two per core) beside the sanitizer builds, then those
#                              that need the machine alone (RUN_SERIAL), one at a time
#   packaging/setup.sh quick   build + the quick tier (label quick): the coding loop
#   packaging/setup.sh long    test + the long tier (label long, sanitize-long under ASan) and
#                              the release checks (packages, fresh-root)
#   packaging/setup.sh bench   build + the benchmarks in tests/bench
#   packaging/setup.sh packages  the Debian source package (with usrsctp's orig tarball as a
#                              component) and binary packages (dpkg-buildpackage, lintian);
#                              the binary packages in BUILD_DIR/packages
#
# Environment: BUILD_DIR (default ./build), SANITIZE_DIR and TSAN_DIR (default
# BUILD_DIR-sanitize, BUILD_DIR-tsan), JOBS (default: number of cores).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=${BUILD_DIR:-$here/build}
sanitize_dir=${SANITIZE_DIR:-$build_dir-sanitize}
tsan_dir=${TSAN_DIR:-$build_dir-tsan}
jobs=${JOBS:-$(nproc)}

# Everything the build, the tests, the plots, the dissector and the BPF modules need is declared
# in one place, the Build-Depends of packaging/debian/control (test-only entries marked
# <!nocheck>); this installs exactly that list with apt-get build-dep.
control=$here/packaging/debian/control

log() { printf '[setup] %s\n' "$*" >&2; }

# Runs a command and says how long it took, so that a slow CI run shows which phase grew
# (the gating suite has a 30-minute budget: tests/README.md). Returns the command's status.
# Where it ran ctest in a build tree and a test failed, the failed tests' names go to
# $failed_tests too, so that the command's last lines say which tests failed (CI shows a
# run's tail; ctest's own list sits above the output of every phase after it).
timed() {
  local what=$1 start status=0 outcome="" failed=Testing/Temporary/LastTestsFailed.log
  shift
  rm -f "$failed"
  start=$(date +%s)
  "$@" || status=$?
  ((status == 0)) || outcome=", failed ($status)"
  log "$what: $(($(date +%s) - start)) s$outcome"
  if ((status != 0)) && [[ -n ${failed_tests:-} && -s $failed ]]; then
    sed "s|^|$what: |" "$failed" >>"$failed_tests"
  fi
  return $status
}

# A directory with debian/control, as apt-get build-dep and dpkg-checkbuilddeps want it.
control_dir() {
  local dir
  dir=$(mktemp -d)
  mkdir "$dir/debian"
  cp "$control" "$dir/debian/control"
  echo "$dir"
}

deps_missing() {  # prints what is missing; fails if something is
  local dir status=0
  dir=$(control_dir)
  (cd "$dir" && dpkg-checkbuilddeps) || status=1
  rm -rf "$dir"
  return $status
}

# The bundled usrsctp is built from Debian's source package (apt-get source libusrsctp:
# src/sctp/bundled-usrsctp.sh), which needs a deb-src entry for the release: one is added
# beside the deb entries of the archive when there is none.
enable_deb_src() {
  [[ $(id -u) -eq 0 ]] || return 0
  if apt-get indextargets --format '$(IDENTIFIER)' 2>/dev/null | grep -qx Sources; then
    return 0
  fi
  local codename uri
  codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
  [[ -n $codename ]] || { log "no VERSION_CODENAME in /etc/os-release: no deb-src entry added"; return 0; }
  uri=$(apt-get indextargets --format '$(REPO_URI)' 'Identifier: Packages' 2>/dev/null |
        grep -m1 -E '/debian/?$' || echo http://deb.debian.org/debian/)
  printf 'Types: deb-src\nURIs: %s\nSuites: %s\nComponents: main\nSigned-By: %s\n' "$uri" "$codename" \
    /usr/share/keyrings/debian-archive-keyring.gpg > /etc/apt/sources.list.d/netperfmeter-deb-src.sources
  log "added a deb-src entry for $codename ($uri) for the source of the bundled usrsctp"
  apt-get update -qq
}

install_deps() {
  enable_deb_src
  if command -v dpkg-checkbuilddeps >/dev/null && deps_missing 2>/dev/null; then
    log "all packages of $control present"
    return
  fi
  if [[ $(id -u) -ne 0 ]]; then
    log "packages of $control are missing (run as root to install them)"
    command -v dpkg-checkbuilddeps >/dev/null && deps_missing
    exit 1
  fi
  log "installing the Build-Depends of $control"
  export DEBIAN_FRONTEND=noninteractive
  # tshark asks whether non-root users may capture; answer it up front.
  echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections
  apt-get update -qq
  local dir
  dir=$(control_dir)
  apt-get build-dep -y -qq --no-install-recommends "$dir" >/dev/null || { rm -rf "$dir"; exit 1; }
  rm -rf "$dir"
  deps_missing || { log "still missing after apt-get build-dep"; exit 1; }
}

# alone_tests BUILD_DIR: a ctest regular expression of the tests of BUILD_DIR that need the
# machine alone (RUN_SERIAL), for -R (only them) and -E (all but them); ^$ (no test) when none.
alone_tests() {
  ctest --test-dir "$1" --show-only=json-v1 | python3 -c '
import json, re, sys
names = [t["name"] for t in json.load(sys.stdin)["tests"]
         if any(p["name"] == "RUN_SERIAL" and p["value"] for p in t.get("properties", []))]
for name in names:
    if not re.fullmatch(r"[A-Za-z0-9_-]+", name):
        sys.exit(f"setup.sh: a test that runs alone has a name that is no plain word: {name!r}")
print("^(" + "|".join(names) + ")$" if names else "^$")'
}

build() {
  install_deps
  # The fuzz smoke test runs under ASan+UBSan in the sanitizer build of "test"; here it links
  # the plain layers instead of compiling them once more with sanitizers (tests/fuzz).
  cmake -S "$here" -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DNPM_FUZZ_SANITIZED=OFF >/dev/null
  cmake --build "$build_dir" -j "$jobs"
}

case "${1:-}" in
  deps)  install_deps ;;
  build) build ;;
  demo)  build; exec "$here/packaging/demo.sh" "$build_dir" ;;
  test)
    timed "build ($build_dir)" build
    # The sanitizer builds are for finding bugs, not for speed: line tables only, which halves
    # their build time; the ASan build at -O0 (its build 304 -> 191 s here, its tests 158 -> 208 s:
    # a minute less in all), the TSan build at -O1 (its tests check rates under TSan's cost).
    san_flags=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DNPM_WITH_DISSECTORS=OFF -DNPM_WITH_BPF_CC=OFF -DNPM_WITH_RPLOT=OFF)
    # The same tests once more in an ASan+UBSan build, where reading freed memory or
    # overflowing a buffer fails the test instead of passing unnoticed (label "sanitize").
    # This build links the system's libusrsctp, so that the second configuration of the
    # userland stack (-DNPM_USRSCTP=system: process-wide buffer splitting and DAC, the knobs
    # that need the bundled stack refused) is built and tested too.
    cmake -S "$here" -B "$sanitize_dir" -G Ninja "${san_flags[@]}" "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O0 -g1 -DNDEBUG" \
      "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O0 -g1 -DNDEBUG" -DNPM_SANITIZE=address,undefined -DNPM_USRSCTP=system >/dev/null
    # And the userland SCTP paths (usrsctp's threads, the upcall into Asio) under TSan, with the
    # unit tests of state shared between threads (tagged [tsan]).
    # (No QUIC there: none of its tests uses it.)
    cmake -S "$here" -B "$tsan_dir" -G Ninja "${san_flags[@]}" "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG" \
      "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG" -DNPM_WITH_QUIC=OFF -DNPM_SANITIZE=thread >/dev/null
    # The gating suite: everything but the long tier and the release checks (labels "long",
    # "packages", "fresh-root": packaging/setup.sh long, ctest -L ...), then its "sanitize" tests
    # in the ASan build and its "tsan" tests in the TSan build (tests/README.md). In two phases:
    # 1. The tests that may run beside others, BESIDE_JOBS at a time (default: two per core: they
    #    use about half a core each -- the whole suite ran at 0.93 of the 2 cores here on
    #    2026-12-02, with two at a time), and beside them the sanitizer builds at the lowest CPU
    #    priority, which take what the tests leave idle, then those builds' tests of this kind.
    # 2. The tests that need the machine alone (RUN_SERIAL: rates, timing, the delay lines'
    #    lateness), one at a time with nothing else running: the plain build's, then the
    #    sanitizer builds'.
    # (From a fresh clone on 2026-12-02: 35 min 17 s one phase after the other, 32 min 53 s so:
    # tests/README.md, Tiers.)
    beside_jobs=${BESIDE_JOBS:-$((jobs * 2))}
    tiers='^(long|packages|fresh-root)$'
    # Which tests run alone, once per build tree (configured: the list needs no build).
    alone_plain=$(alone_tests "$build_dir")
    alone_sanitize=$(alone_tests "$sanitize_dir")
    alone_tsan=$(alone_tests "$tsan_dir")
    status=0
    failed_tests=$build_dir/failed-tests.txt
    : >"$failed_tests"
    sanitizer_log=$build_dir/sanitizer-builds.log
    sanitizers_beside() {
      local s=0
      timed "build ($sanitize_dir), beside the tests" nice -n 19 cmake --build "$sanitize_dir" -j "$jobs" || return 1
      timed "build ($tsan_dir), beside the tests" nice -n 19 cmake --build "$tsan_dir" -j "$jobs" \
        --target netperfmeter npm_tsan_unit_tests || return 1
      (cd "$sanitize_dir" && timed "sanitize tests beside others" ctest --output-on-failure --timeout 900 \
         -j "$beside_jobs" -L '^sanitize$' -E "$alone_sanitize") || s=1
      (cd "$tsan_dir" && TSAN_OPTIONS=halt_on_error=1 timed "tsan tests beside others" ctest --output-on-failure \
         --timeout 900 -j "$beside_jobs" -L '^tsan$' -E "$alone_tsan") || s=1
      return $s
    }
    log "the sanitizer builds and their tests run beside the gating tests (their output: $sanitizer_log)"
    sanitizers_beside >"$sanitizer_log" 2>&1 &
    sanitizers=$!
    (cd "$build_dir" && timed "gating tests beside others" ctest --output-on-failure --timeout 900 -j "$beside_jobs" \
       -LE "$tiers" -E "$alone_plain") || status=1
    sanitizers_status=0
    wait "$sanitizers" || sanitizers_status=$?
    # What they printed, their failures' output included (the build's lines of progress left out).
    grep -v -E '^\[[0-9]+/[0-9]+\] ' "$sanitizer_log" >&2 || true
    ((sanitizers_status == 0)) || { status=1; log "the sanitizer builds or their tests failed ($sanitizer_log)"; }
    (cd "$build_dir" && timed "gating tests alone" ctest --output-on-failure --timeout 900 -LE "$tiers" \
       -R "$alone_plain") || status=1
    (cd "$sanitize_dir" && timed "sanitize tests alone" ctest --output-on-failure --timeout 900 -L '^sanitize$' \
       -R "$alone_sanitize") || status=1
    (cd "$tsan_dir" && TSAN_OPTIONS=halt_on_error=1 timed "tsan tests alone" ctest --output-on-failure \
       --timeout 900 -L '^tsan$' -R "$alone_tsan") || status=1
    if [[ -s $failed_tests ]]; then
      log "failed tests (phase: number:name):"
      sed 's/^/  /' "$failed_tests" >&2
    fi
    exit $status
    ;;
  quick)
    # The coding loop: the quick tier of the plain build (a few minutes).
    build
    cd "$build_dir" && exec ctest --output-on-failure --timeout 300 -j "$jobs" -L '^quick$'
    ;;
  long)
    # The long tier, run before resolving the issues that touch it: the full quick-form lab
    # studies, statistical claims over repeated runs, the long stress test, and under ASan the
    # tests the gating suite runs only in the plain build; then the release checks.
    "$0" test || exit 1
    status=0
    (cd "$build_dir" && ctest --output-on-failure --timeout 7200 -L '^long$') || status=1
    (cd "$sanitize_dir" && ctest --output-on-failure --timeout 900 -L '^sanitize-long$') || status=1
    (cd "$build_dir" && ctest --output-on-failure --timeout 7200 -L '^(packages|fresh-root)$') || status=1
    exit $status
    ;;
  bench) build; exec "$here/tests/bench/run-all.sh" "$build_dir" ;;
  packages)
    install_deps
    # The Debian source package, the Debian way: the tracked files (as they are in the work
    # tree, packaging/debian aside) as the orig tarball, and usrsctp's orig tarball -- the one of
    # Debian's libusrsctp source package the patch series applies to -- as the component
    # "usrsctp", which debian/rules builds the bundled stack from (no download in the package
    # build). dpkg-buildpackage builds source and binary packages; lintian checks them all.
    version=$(sed -n 's/^project(netperfmeter VERSION \([0-9.]*\).*/\1/p' "$here/CMakeLists.txt")
    deb=$build_dir/deb src=$build_dir/deb/netperfmeter-$version
    usrsctp_source=${NPM_USRSCTP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/netperfmeter/usrsctp}/source
    usrsctp_upstream=$(tr -d ' \n' < "$here/src/sctp/usrsctp-patches/VERSION")
    usrsctp_upstream=${usrsctp_upstream%-*}
    sh "$here/src/sctp/bundled-usrsctp.sh" --series "$here/src/sctp/usrsctp-patches" --fetch-only --source "$usrsctp_source" ||
      { log "the usrsctp source is needed for the package's component tarball"; exit 1; }
    rm -rf "$deb" "$build_dir/packages"
    mkdir -p "$src" "$build_dir/packages"
    (cd "$here" && git ls-files -z | grep -zv '^packaging/debian/' | tar --null -T - -cf -) | tar -xf - -C "$src"
    (cd "$deb" && tar -cJf "netperfmeter_$version.orig.tar.xz" --owner=0 --group=0 --sort=name "netperfmeter-$version")
    cp "$usrsctp_source/libusrsctp_$usrsctp_upstream.orig.tar.gz" "$deb/netperfmeter_$version.orig-usrsctp.tar.gz"
    mkdir "$src/usrsctp"
    tar -xzf "$deb/netperfmeter_$version.orig-usrsctp.tar.gz" -C "$src/usrsctp" --strip-components=1
    cp -r "$here/packaging/debian" "$src/debian"
    (cd "$src" && dpkg-buildpackage -us -uc -j"$jobs") >"$deb/build.log" 2>&1 ||
      { tail -40 "$deb/build.log" >&2; log "dpkg-buildpackage failed: $deb/build.log"; exit 1; }
    # No lintian error or warning: what is left is justified in packaging/debian/*.lintian-overrides.
    lintian --fail-on error,warning "$deb"/*.changes || { log "lintian reports errors or warnings"; exit 1; }
    cp "$deb"/*.deb "$build_dir/packages/"
    log "packages in $build_dir/packages, source package in $deb (lintian: no errors or warnings):"
    ls "$build_dir/packages" >&2
    ;;
  *) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 1 ;;
esac
