#!/usr/bin/env bash
# The install rules: programs to bin, the R package npmplot to lib/R/site-library (the default
# NPM_RPLOT_LIBDIR), README and example to share/netperfmeter, man pages; the installed
# programs find the installed package (relative to themselves: the prefix differs from the
# configured one here) and work.
# Usage: e2e-install.sh CMAKE BUILD_DIR TESTS_DIR WORK_DIR
set -euo pipefail
cmake=$1 build=$2 tests=$3 work=$4
. "$tests/lib.sh"
need Rscript r-base-core
need_npmplot
need pdfinfo poppler-utils
rm -rf "$work" && mkdir -p "$work"
prefix=$work/prefix
"$cmake" --install "$build" --component rplot --prefix "$prefix" >/dev/null
for f in bin/plot-netperfmeter-results bin/plot-netperfmeter-summary \
         lib/R/site-library/npmplot/DESCRIPTION lib/R/site-library/npmplot/NAMESPACE \
         lib/R/site-library/npmplot/R/npmplot.rdb lib/R/site-library/npmplot/help/AnIndex \
         share/netperfmeter/README.md \
         share/netperfmeter/examples/cmt-throughput.R \
         share/man/man1/plot-netperfmeter-results.1 share/man/man1/plot-netperfmeter-summary.1; do
  [[ -s $prefix/$f ]] || fail "$f not installed"
done
[[ -x $prefix/bin/plot-netperfmeter-results && -x $prefix/bin/plot-netperfmeter-summary ]] \
  || fail "programs not executable"
if command -v groff >/dev/null; then
  for m in "$prefix"/share/man/man1/*.1; do
    out=$(groff -man -Tutf8 -ww -z "$m" 2>&1) || fail "groff rejects $m"
    [[ -z $out ]] || fail "groff warns about $m: $out"
  done
  # Every long option of --help is documented in the man page.
  for p in plot-netperfmeter-results plot-netperfmeter-summary; do
    txt=$(groff -man -Tascii -P-cbou "$prefix/share/man/man1/$p.1" 2>/dev/null)
    for o in $("$prefix/bin/$p" --help | grep -o -- '--[a-z][a-z-]*' | sort -u); do
      grep -q -- "$o" <<<"$txt" || fail "$p.1 does not document $o"
    done
  done
fi
[[ ! -e $prefix/share/netperfmeter/npmplot.R ]] || fail "the old sourced library is still installed"
grep -qx "Version: $("$prefix/bin/plot-netperfmeter-summary" --version | sed 's/^NetPerfMeter //')" \
  "$prefix/lib/R/site-library/npmplot/DESCRIPTION" || fail "installed package and program differ in version"
# The installed programs use the installed package only (not the build tree's).
unset NPM_RPLOT_LIBRARY
Rscript "$SYNTHETIC_RUN" "$work/run" run
"$prefix/bin/plot-netperfmeter-results" "$work/run/run.config" -n -q
check_pdf_pages "$work/run/run.pdf" 7
# The example loads the package from R's library paths, here the prefix's through R_LIBS.
R_LIBS=$prefix/lib/R/site-library Rscript "$prefix/share/netperfmeter/examples/cmt-throughput.R" "$work" >/dev/null
"$prefix/bin/plot-netperfmeter-summary" "$work/active.flow-ReceivedBitRate.data.bz2" -x rhoDFN \
  -c Gamma -o "$work/s.pdf" -q
check_pdf_pages "$work/s.pdf" 1
# A package that cannot be found is one clear line (R's own library paths left empty).
cp "$prefix/bin/plot-netperfmeter-summary" "$work/lonely"
sed -i 's|^libdirs <- .*|libdirs <- "/nonexistent"|' "$work/lonely"
grep -qx 'libdirs <- "/nonexistent"' "$work/lonely" || fail "the program names no library directories"
R_LIBS='' R_LIBS_USER=/nonexistent R_LIBS_SITE=/nonexistent \
  expect_error "cannot find the R package npmplot" "$work/lonely" --help
echo "PASS"
