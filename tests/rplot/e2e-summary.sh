#!/usr/bin/env bash
# End to end: the example script draws the classic CMT figure from a synthetic
# createsummary table; plot-netperfmeter-summary draws it in PDF, PNG and SVG,
# in colour and grey. Usage: e2e-summary.sh BUILD_RPLOT_DIR TESTS_DIR WORK_DIR
set -euo pipefail
rplot=$1 tests=$2 work=$3
. "$tests/lib.sh"
need Rscript r-base-core
need_npmplot
need pdfinfo poppler-utils
rm -rf "$work" && mkdir -p "$work"
prog=$rplot/plot-netperfmeter-summary

Rscript "$RPLOT_SOURCE/examples/cmt-throughput.R" "$work" >/dev/null
table=$work/active.flow-ReceivedBitRate.data.bz2
check_pdf_pages "$work/cmt-throughput.pdf" 1
check_png "$work/cmt-throughput.png" 1350x720
[[ $(bzcat "$table" | wc -l) -eq 441 ]] || fail "table rows"     # 4 CC x 11 rho x 5 runs x 2 flows

common=(-x rhoDFN -c Gamma -k active.flow --x-unit=bit/s:Mbit/s --y-unit=bit/s:Mbit/s
        "--xlab=Bandwidth \\rho_{DFN} of path 1 [Mbit/s]" "--ylab=Throughput [Mbit/s]"
        "--colour-title=\\Gamma" "--value-label=active.flow:0=CMT-SCTP flow"
        "--value-label=active.flow:1=Reference flow" "--value-label=Gamma:cmtrpv1=CMT/RP_{v1}")
"$prog" "$table" "${common[@]}" -q
check_pdf_pages "$work/active.flow-ReceivedBitRate.pdf" 1
"$prog" "$table" "${common[@]}" -o "$work/fig.png" --width 6 --height 4 --dpi 200 --grey -q
check_png "$work/fig.png" 1200x800
"$prog" "$table" "${common[@]}" -o "$work/fig.svg" -q
check_svg "$work/fig.svg"
# Filter, line type, facet rows, 90 % intervals, a dump of the plotted statistics.
"$prog" "$table" -x rhoDFN -y active.flow-ReceivedBitRate -l Gamma -r active.flow \
  -F 'Gamma %in% c("cmt", "like-mptcp") & rhoDFN <= 10e6' --confidence=90 \
  --y-scale=1e-6 --dump "$work/dump.csv" -o "$work/filtered.pdf" -q
check_pdf_pages "$work/filtered.pdf" 1
[[ $(wc -l <"$work/dump.csv") -eq $((2 * 6 * 2 + 1)) ]] || fail "dump rows"
grep -qx "rhoDFN,Gamma,active.flow,N,Mean,SD,Lower,Upper,Interval" <<<"$(head -1 "$work/dump.csv" | tr -d '"')" || fail "dump header"
# The dumped interval is t.test()'s (90 %) of the filtered rows.
Rscript -e '
  d <- read.table(pipe(paste("bzcat", shQuote(commandArgs(TRUE)[1]))), header = TRUE, check.names = FALSE)
  v <- d[d$Gamma == "cmt" & d$rhoDFN == 10e6 & d$active.flow == 0, ncol(d)] * 1e-6
  s <- read.csv(commandArgs(TRUE)[2])
  s <- s[s$Gamma == "cmt" & s$rhoDFN == 10e6 & s$active.flow == 0, ]
  ci <- t.test(v, conf.level = 0.9)$conf.int
  stopifnot(s$N == 5, abs(s$Mean - mean(v)) < 1e-9, abs(s$Lower - ci[1]) < 1e-9, abs(s$Upper - ci[2]) < 1e-9)
' "$table" "$work/dump.csv" || fail "dumped statistics differ from t.test()"
# One repetition only: drawn without intervals, the caption saying so.
"$prog" "$table" -x rhoDFN -c Gamma -F "Repetition == 1 & active.flow == 0" -o "$work/one.pdf" \
  --dump "$work/one.csv" -q
check_pdf_pages "$work/one.pdf" 1
tr -d '"' <"$work/one.csv" | grep -q ",1,.*,NA,NA,NA,single run$" || fail "single repetition should have no interval"

# Option values as separate words; -y defaults to the last column (not --y-unit's value).
"$prog" "$table" -x rhoDFN --y-unit bit/s:Gbit/s -c Gamma -o "$work/words.pdf" -q
check_pdf_pages "$work/words.pdf" 1
# Categories on x: points side by side.
"$prog" "$table" -x Gamma -c active.flow --y-unit bit/s:Mbit/s -F 'rhoDFN == 20e6' -o "$work/cat.png" \
  --dpi 100 -q
check_png "$work/cat.png" 700x500

grep -q "^Usage: plot-netperfmeter-summary TABLE" <<<"$("$prog" --help)" || fail "--help"
echo "PASS"
