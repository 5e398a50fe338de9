#!/usr/bin/env bash
# One family: every program answers -v and --version with exit status 0 and a first line
# "NAME VERSION" (VERSION: CMake's project version), as netperfmeter does; the loader's
# "-v start" is still --verbose start (netperfmeter-cc-loader(8)), checked without registering
# anything: with a kernel release it refuses.
#   test_versions.sh VERSION NAME=PATH...
source "$(dirname "$0")/lib.sh"
VERSION=$1
shift
for arg in "$@"; do
  name=${arg%%=*} path=${arg#*=}
  for option in -v --version; do
    out=$("$path" "$option" 2>&1)
    rc=$?
    first=$(head -n 1 <<<"$out")
    if [ $rc -eq 0 ] && [[ $first =~ ^[A-Za-z][A-Za-z-]*\ ${VERSION//./\\.}$ ]]; then
      pass "$name $option -> $first"
    else
      fail "$name $option: exit $rc, \"$first\" (expected \"NAME $VERSION\")"
    fi
  done
  if [ "$name" == netperfmeter-cc-loader ]; then
    out=$(NPM_CC_LOADER_KERNEL_RELEASE=5.10.0 "$path" -v start 2>&1)
    rc=$?
    grep -q -- "-v with a command is the old spelling of --verbose" <<<"$out" && [ $rc -ne 0 ] &&
      ! grep -q "^NetPerfMeter-CC-Loader" <<<"$out" &&
      pass "netperfmeter-cc-loader -v start is --verbose start (exit $rc on a 5.10 kernel)" ||
      fail "netperfmeter-cc-loader -v start: exit $rc: $out"
  fi
done
finish
