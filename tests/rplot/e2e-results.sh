#!/usr/bin/env bash
# End to end: plot-netperfmeter-results on synthetic runs (bzip2 and plain files,
# flow IDs 0 and 7, hostile descriptions): PDF pages and bookmarks, PNG sizes, SVG,
# options. Usage: e2e-results.sh BUILD_RPLOT_DIR TESTS_DIR WORK_DIR
set -euo pipefail
rplot=$1 tests=$2 work=$3
. "$tests/lib.sh"
need Rscript r-base-core
need_npmplot
need pdfinfo poppler-utils
need pdftohtml poppler-utils
rm -rf "$work" && mkdir -p "$work"
prog=$rplot/plot-netperfmeter-results

Rscript "$SYNTHETIC_RUN" "$work/bz2" run --nasty
Rscript "$SYNTHETIC_RUN" "$work/plain" run --plain

# Default: <config minus .config>.pdf with overview + per-flow pages and bookmarks.
(cd "$work/bz2" && "$prog" run.config >out.txt)
grep -qx "run.pdf" "$work/bz2/out.txt" || fail "written file not listed"
check_pdf_pages "$work/bz2/run.pdf" 11      # 7 overview + 2 flows x (bit rate, delay/jitter)
pdftohtml -xml -i -stdout "$work/bz2/run.pdf" >"$work/outline.xml"
for t in '>Overview<' '>Bit rate<' '>CPU utilisation<' '>One-way delay and jitter<' \
         'Voice; rm -rf / ${HOME}' '(UDP, ID 7)<' '(TCP, ID 0)<'; do
  grep -qF "$t" "$work/outline.xml" || fail "bookmark $t missing"
done
[[ ! -e $work/bz2/PWNED1 && ! -e $work/bz2/PWNED2 && ! -e PWNED1 ]] || fail "a description was executed"
ls "$work"/bz2/.npmplot-* 2>/dev/null && fail "temporary files left behind"

# Options in any order; -n; output name; time range.
"$prog" -n -q -o "$work/overview.pdf" "$work/bz2/run.config"
check_pdf_pages "$work/overview.pdf" 7
"$prog" "$work/plain/run.config" --time-range=1:3 --output="$work/range.pdf" -q
check_pdf_pages "$work/range.pdf" 11
"$prog" "$work/plain/run.config" -t 2: -p -o "$work/from2.pdf" -q --grey
check_pdf_pages "$work/from2.pdf" 11

# PNG: one file per plot, size = inches x dpi.
mkdir -p "$work/png"
"$prog" "$work/bz2/run.config" --format=png --width=8 --height=5 --dpi=100 -o "$work/png/run" -q
n=$(ls "$work"/png/run-*.png | wc -l)
[[ $n -eq 11 ]] || fail "expected 11 PNG files, got $n"
for f in "$work"/png/run-*.png; do check_png "$f" 800x500; done
[[ -e $work/png/run-01-overview-bit-rate.png ]] || fail "PNG names"

# SVG and --own-file PDFs.
mkdir -p "$work/svg" "$work/own"
"$prog" "$work/plain/run.config" -n -f svg -o "$work/svg/run.svg" -q
[[ $(ls "$work"/svg/*.svg | wc -l) -eq 7 ]] || fail "expected 7 SVG files"
for f in "$work"/svg/*.svg; do check_svg "$f"; done
"$prog" "$work/plain/run.config" -w -o "$work/own/run.pdf" -q
[[ $(ls "$work"/own/*.pdf | wc -l) -eq 11 ]] || fail "expected 11 PDF files"
for f in "$work"/own/*.pdf; do check_pdf_pages "$f" 1; done

# Help and version.
grep -q "^Usage: plot-netperfmeter-results CONFIG" <<<"$("$prog" --help)" || fail "--help"
grep -q "^NetPerfMeter [0-9]" <<<"$("$prog" --version)" || fail "--version"
echo "PASS"
