#!/usr/bin/env bash
# The install rules: programs to bin, library and example to share/netperfmeter,
# man pages; the installed programs find their library and work.
# Usage: e2e-install.sh CMAKE BUILD_DIR TESTS_DIR WORK_DIR
set -euo pipefail
cmake=$1 build=$2 tests=$3 work=$4
. "$tests/lib.sh"
need Rscript r-base-core
need pdfinfo poppler-utils
rm -rf "$work" && mkdir -p "$work"
prefix=$work/prefix
"$cmake" --install "$build" --component rplot --prefix "$prefix" >/dev/null
for f in bin/plot-netperfmeter-results bin/plot-netperfmeter-summary \
         share/netperfmeter/npmplot.R share/netperfmeter/README.md \
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
# The installed programs and the example use the installed library only.
unset NPM_RPLOT_LIBRARY
Rscript "$tests/make-synthetic-run.R" "$work/run" run
"$prefix/bin/plot-netperfmeter-results" "$work/run/run.config" -n -q
check_pdf_pages "$work/run/run.pdf" 7
Rscript "$prefix/share/netperfmeter/examples/cmt-throughput.R" "$work" >/dev/null
"$prefix/bin/plot-netperfmeter-summary" "$work/active.flow-ReceivedBitRate.data.bz2" -x rhoDFN \
  -c Gamma -o "$work/s.pdf" -q
check_pdf_pages "$work/s.pdf" 1
# A library that cannot be found is one clear line.
cp "$prefix/bin/plot-netperfmeter-summary" "$work/lonely"
sed -i 's|@NPM_RPLOT_DATADIR@|/nonexistent|; s|^  cand <- c(cand, ".*npmplot.R")$|  cand <- cand|' "$work/lonely"
sed -i "s|$prefix/share/netperfmeter|/nonexistent|" "$work/lonely"
expect_error "cannot find npmplot.R" "$work/lonely" --help
echo "PASS"
