#!/usr/bin/env bash
# End to end: the parameter-study example (packaging/examples/run-experiment1: loopback,
# tcp/udp x 2 frame sizes x 2 repetitions, 1 s runs) with the real netperfmeter and
# createsummary, then plot-netperfmeter-summary on its passive.flow-ReceivedBitRate table.
# Usage: e2e-study.sh EXAMPLE BIN_DIRS(colon-separated) BUILD_RPLOT_DIR TESTS_DIR WORK_DIR PORT
set -euo pipefail
example=$1 bins=$2 rplot=$3 tests=$4 work=$5 port=$6
. "$tests/lib.sh"
need Rscript r-base-core
need_npmplot
need pdfinfo poppler-utils
[[ -r $example ]] || skip "$example is missing"
export PATH="$bins:$PATH"
for p in netperfmeter createsummary getabstime runtimeestimator; do
  command -v "$p" >/dev/null || fail "$p not built"
done
rm -rf "$work" && mkdir -p "$work" && cd "$work"
port=$(free_port "$port")
NAME=study PORT=$port RUNTIME=1 REPETITIONS=2 FRAMESIZES="500 1400" UDP_RATE=1000 \
  timeout 300 bash "$example" >study.log 2>&1 || fail "the study (port $port) failed: $(tail -5 study.log) $(tail -3 study/passive.log 2>/dev/null)"
table=study/passive.flow-ReceivedBitRate.data.bz2
[[ -s $table ]] || fail "no $table"
prog=$rplot/plot-netperfmeter-summary
"$prog" "$table" -x FrameSize -c Protocol --y-unit=bit/s:Mbit/s --y-log \
  --xlab="Frame size [B]" --ylab="Received bit rate [Mbit/s]" --dump study.csv -o study.pdf -q
check_pdf_pages study.pdf 1
[[ $(wc -l <study.csv) -eq 5 ]] || fail "expected 4 points: $(cat study.csv)"
awk -F, 'NR > 1 && $3 != 2 { exit 1 }' study.csv || fail "expected 2 repetitions per point: $(cat study.csv)"
"$prog" "$table" -x Protocol -k FrameSize --grey -o study.png --width 5 --height 4 --dpi 100 -q
check_png study.png 500x400
# The same study as strict CSV tables (createsummary --csv).
(cd study && { echo "--resultsdirectory=csv"; cat results.summary; } >csv.summary \
  && mkdir -p csv && createsummary --batch --quiet --csv <csv.summary >/dev/null) \
  || fail "createsummary --csv failed"
"$prog" study/csv/passive.flow-ReceivedBitRate.csv.bz2 -x FrameSize -c Protocol \
  --dump csv.csv -o csv.pdf -q
check_pdf_pages csv.pdf 1
[[ $(wc -l <csv.csv) -eq 5 ]] || fail "CSV table: expected 4 points: $(cat csv.csv)"
echo "PASS"
