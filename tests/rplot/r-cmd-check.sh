#!/usr/bin/env bash
# R CMD check of the R package npmplot: R CMD build makes the source tarball, R CMD check
# checks it (offline: no --as-cran; no PDF manual). Fails on an ERROR or a WARNING; the
# NOTEs are printed. Usage: r-cmd-check.sh R PACKAGE_DIR WORK_DIR
set -euo pipefail
r=$1 package=$2 work=$3
. "$(dirname "$0")/lib.sh"
for p in data.table ggplot2 testthat; do
  "$r" --vanilla --no-echo -e "quit(status = !requireNamespace('$p', quietly = TRUE))" ||
    skip "R package $p is missing (r-cran-$(tr 'A-Z' 'a-z' <<<"$p"))"
done
rm -rf "$work" && mkdir -p "$work" && cd "$work"
"$r" CMD build --no-manual --no-build-vignettes "$package" >build.log 2>&1 || { cat build.log; fail "R CMD build"; }
tarball=$(ls npmplot_*.tar.gz)
_R_CHECK_FORCE_SUGGESTS_=false "$r" CMD check --no-manual "$tarball" >check.log 2>&1 || true
log=npmplot.Rcheck/00check.log
[[ -s $log ]] || { cat check.log; fail "R CMD check wrote no log"; }
grep -E "^\* checking .*\.\.\. (NOTE|WARNING|ERROR)" "$log" || true
status=$(sed -n 's/^Status: //p' "$log")
echo "R CMD check $tarball: ${status:-no status}"
if grep -qE "^\* .*\.\.\. (WARNING|ERROR)|^Status: .*(WARNING|ERROR)" "$log"; then
  cat "$log"
  for f in npmplot.Rcheck/tests/*.Rout.fail; do [[ -e $f ]] && tail -n 40 "$f"; done
  fail "R CMD check found an ERROR or a WARNING"
fi
[[ -n $status ]] || { cat "$log"; fail "R CMD check did not finish"; }
echo "PASS"
