#!/usr/bin/env bash
# End to end with the real tool: a loopback run of netperfmeter with vectors and
# scalars (a TCP flow with ID 0 and a UDP flow with ID 7), then
# plot-netperfmeter-results: PDF page count and bookmarks, PNG sizes.
# Both flows are rate-driven: a saturated loopback flow writes a vector row per message, and
# compressing and plotting those rows took most of this test's 69 s (ctest's cost data) without
# checking anything more; the README's demo (packaging/demo.sh) plots saturated flows.
# Usage: e2e-netperfmeter.sh NETPERFMETER BUILD_RPLOT_DIR TESTS_DIR WORK_DIR PORT
set -euo pipefail
npm=$1 rplot=$2 tests=$3 work=$4 port=$5
. "$tests/lib.sh"
need Rscript r-base-core
need_npmplot
need pdfinfo poppler-utils
need pdftohtml poppler-utils
[[ -x $npm ]] || fail "$npm is not an executable"
rm -rf "$work" && mkdir -p "$work" && cd "$work"
port=$(free_port "$port")

"$npm" "$port" -nodisplay >passive.log 2>&1 &
passive=$!
trap 'kill "$passive" 2>/dev/null || true; wait "$passive" 2>/dev/null || true' EXIT
for _ in $(seq 50); do
  (exec 3<>"/dev/tcp/127.0.0.1/$((port + 1))") 2>/dev/null && break
  kill -0 "$passive" 2>/dev/null || fail "passive netperfmeter exited: $(tail -3 passive.log)"
  sleep 0.2
done
timeout 120 "$npm" "127.0.0.1:$port" -control-over-tcp -runtime=3 -nodisplay \
  -config=run.config -vector=run.vec.bz2 -scalar=run.sca.bz2 \
  -tcp const400:const1400:const400:const1400:description=Bulk \
  -udp const50:const500:const25:const1000:id=7:description=Voice >active.log 2>&1 \
  || fail "active netperfmeter (port $port) failed: $(tail -5 active.log) / passive: $(tail -5 passive.log)"
for f in run.config run-active.vec.bz2 run-passive.vec.bz2 \
         run-active-00000000-0000.vec.bz2 run-passive-00000000-0000.vec.bz2 \
         run-active-00000007-0000.vec.bz2 run-passive-00000007-0000.vec.bz2 \
         run-paths-active-00000000-0000.vec.bz2 run-paths-passive-00000000-0000.vec.bz2; do
  [[ -s $f ]] || fail "netperfmeter did not write $f"
done

"$rplot/plot-netperfmeter-results" run.config -q
pdftohtml -xml -i -stdout run.pdf >outline.xml
pages=$(pdf_pages run.pdf)
# 4 rate/volume/loss pages + delay + jitter (+ CPU when the scalars carry it),
# and per flow: bit rate + delay/jitter, and for the TCP flow its per-path state.
cpu=0
bzcat run-active.sca.bz2 run-passive.sca.bz2 >scalars.txt   # (no early-exit grep in a pipe)
grep -q 'CPU\[' scalars.txt && cpu=1
expected=$((6 + cpu + 2 * 2 + 1))
[[ $pages -eq $expected ]] || fail "run.pdf has $pages pages, expected $expected: $(grep -o '<item[^<]*</item>' outline.xml | tr '\n' ' ')"
for t in '>Bulk (TCP, ID 0)<' '>Voice (UDP, ID 7)<' '>Bit rate<' '>One-way delay<' '>Per-path state<'; do
  grep -qF "$t" outline.xml || fail "bookmark $t missing"
done
mkdir png
"$rplot/plot-netperfmeter-results" run.config -f png --width=8 --height=5 --dpi=100 -o png/run -q
n=$(ls png/*.png | wc -l)
[[ $n -eq $expected ]] || fail "expected $expected PNG files, got $n"
for f in png/*.png; do check_png "$f" 800x500; done
echo "PASS ($pages pages)"
