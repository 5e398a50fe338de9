#!/usr/bin/env bash
# Man pages render without warnings, and every long option of --help is documented.
source "$(dirname "$0")/lib.sh"
BIN=$1
MAN=$2
if ! command -v groff >/dev/null; then
  echo "SKIP: groff is not installed (Debian package groff-base)" >&2
  exit 77
fi
for tool in createsummary combinesummaries extractvectors getabstime runtimeestimator netperfmeter; do
  page="$MAN/$tool.1"
  [ -e "$page" ] || { fail "no man page $page"; continue; }
  warnings=$(LC_ALL=C.UTF-8 groff -man -Tutf8 -ww -z "$page" 2>&1)
  [ -z "$warnings" ] && pass "$tool.1 renders cleanly" || fail "$tool.1: $warnings"
  text=$(LC_ALL=C.UTF-8 groff -man -Tutf8 "$page" 2>/dev/null | sed 's/\x1b\[[0-9;]*m//g; s/.\x08//g')
  LC_ALL=C grep -q $'[\x01-\x08\x0b\x0c\x0e-\x1f]' "$page" && fail "$tool.1 contains control characters"
  program="$BIN/$tool"
  [ "$tool" = netperfmeter ] && program="$BIN/../app/netperfmeter"
  for option in $("$program" --help | grep -oE -- '--[a-z][a-z-]+' | sort -u); do
    grep -qF -- "$option" <<<"$text" || fail "$tool: $option is in --help but not in $tool.1"
  done
done
finish
