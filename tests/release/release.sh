#!/usr/bin/env bash
# release.sh packages|autopkgtest|fresh-root SOURCE_DIR BUILD_DIR: the release checks of
# tests/release/CMakeLists.txt. Exit 77 (skip) without root or debootstrap.
set -euo pipefail
what=$1 src=$2 build=$3
if [[ $(id -u) -ne 0 ]]; then echo "SKIP: needs root (debootstrap, chroot, dpkg-buildpackage as root)"; exit 77; fi
case "$what" in
  packages)
    BUILD_DIR=$build "$src/packaging/setup.sh" packages
    ;;
  autopkgtest)
    command -v debootstrap >/dev/null || { echo "SKIP: needs debootstrap"; exit 77; }
    exec "$src/packaging/fresh-root-check.sh" --autopkgtest "$build/packages" /var/tmp/netperfmeter-autopkgtest-root
    ;;
  fresh-root)
    command -v debootstrap >/dev/null || { echo "SKIP: needs debootstrap"; exit 77; }
    exec "$src/packaging/fresh-root-check.sh"
    ;;
  *) echo "usage: release.sh packages|autopkgtest|fresh-root SOURCE_DIR BUILD_DIR" >&2; exit 2 ;;
esac
