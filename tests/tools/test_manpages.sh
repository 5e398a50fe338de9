#!/usr/bin/env bash
# Man pages of every program render without warnings, every long option of --help is on the
# page, and every option the page documents is in --help.
source "$(dirname "$0")/lib.sh"
BIN=$1
MAN=$2
if ! command -v groff >/dev/null; then
  echo "SKIP: groff is not installed (Debian package groff-base)" >&2
  exit 77
fi
SOURCE=$(cd "$(dirname "$0")/../.." && pwd)
# check_page <page> <command printing the help...>: renders cleanly, no control characters,
# every long option of the help is on the page, and every option an entry of the page (.TP)
# documents is in the help.
check_page() {
  local page=$1 name
  shift
  name=$(basename "$page")
  [ -e "$page" ] || { fail "no man page $page"; return; }
  local warnings text help option
  warnings=$(LC_ALL=C.UTF-8 groff -man -Tutf8 -ww -z "$page" 2>&1)
  [ -z "$warnings" ] && pass "$name renders cleanly" || fail "$name: $warnings"
  text=$(LC_ALL=C.UTF-8 groff -man -Tutf8 "$page" 2>/dev/null | sed 's/\x1b\[[0-9;]*m//g; s/.\x08//g')
  LC_ALL=C grep -q $'[\x01-\x08\x0b\x0c\x0e-\x1f]' "$page" && fail "$name contains control characters"
  help=$("$@" 2>&1)
  for option in $(grep -oE -- '--[a-z][a-z-]+' <<<"$help" | sort -u); do
    grep -qF -- "$option" <<<"$text" || fail "$name: $option is in --help but not on the page"
  done
  for option in $(awk 'previous == ".TP" { print } { previous = $1 }' "$page" | sed 's/\\-/-/g' |
                  grep -oE -- '--[a-z][a-z-]+' | sort -u); do
    grep -qF -- "$option" <<<"$help" || fail "$name: $option is on the page but not in --help"
  done
}
for tool in createsummary combinesummaries extractvectors exportvectors getabstime runtimeestimator; do
  check_page "$MAN/$tool.1" "$BIN/$tool" --help
done
check_page "$MAN/netperfmeter.1" "$BIN/../app/netperfmeter" --help
LAB="$BIN/../lab/netperfmeter-lab"
check_page "$SOURCE/src/lab/man/netperfmeter-lab.1" sh -c "'$LAB' --help; '$LAB' run --help; '$LAB' plot --help"
check_page "$SOURCE/src/lab/man/netperfmeter-delayline.1" "$BIN/../lab/netperfmeter-delayline" --help
if [ -x "$BIN/../cc/netperfmeter-cc-loader" ]; then
  check_page "$MAN/netperfmeter-cc-loader.8" "$BIN/../cc/netperfmeter-cc-loader" --help
else
  echo "NOTE: netperfmeter-cc-loader is not built here (no BPF toolchain): its page is not compared"
fi
# (the build tree's plotters, which load the R package npmplot built into the build tree)
if command -v Rscript >/dev/null && [ -d "$BIN/../../rplot/library/npmplot" ]; then
  for plotter in plot-netperfmeter-results plot-netperfmeter-summary; do
    check_page "$SOURCE/rplot/man/$plotter.1" "$BIN/../../rplot/$plotter" --help
  done
else
  echo "NOTE: Rscript or the R package npmplot of the build tree is missing: the plotters' pages are not compared with their --help"
fi
finish
