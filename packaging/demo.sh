#!/usr/bin/env bash
# Demo measurement on loopback: a local passive and a 5 s active run with a TCP, an MPTCP
# and a UDP flow; results (config, scalars, vectors, JSON document, plot) in ./demo-results.
#   packaging/demo.sh [BUILD_DIR]        environment: PORT (default 9000), RUNTIME (default 5)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$(cd "${1:-$here/build}" && pwd)
npm=$build/src/app/netperfmeter
port=${PORT:-9000}
runtime=${RUNTIME:-5}
out=$here/demo-results

rm -rf "$out"
mkdir -p "$out"
cd "$out"

"$npm" "$port" -nodisplay -logfile=passive.log 2>>passive.log &
passive=$!
trap 'kill -INT $passive 2>/dev/null; wait $passive 2>/dev/null || true' EXIT
for _ in $(seq 50); do
  (exec 3<>/dev/tcp/127.0.0.1/$((port + 1))) 2>/dev/null && break
  sleep 0.1
done

# netperfmeter prints both sides' figures per flow and direction at the end (sent, received,
# goodput, lost frames: the same as run.json); its log goes to active.log.
"$npm" "127.0.0.1:$port" -runtime="$runtime" -logfile=active.log \
  -config=run.config -scalar=run.sca.bz2 -vector=run.vec.bz2 --json=run.json \
  -tcp "const0:const1400:const0:const1400:description=TCP bulk" \
  -mptcp "const0:const1400:description=MPTCP bulk" \
  -udp "const50:const500:const25:const1000:description=UDP voice"

echo
echo "Results in $out:"
ls -1 "$out"
echo
plotter=$build/rplot/plot-netperfmeter-results   # loads the R package built into $build/rplot/library
if [[ -x $plotter ]] && command -v Rscript >/dev/null; then
  "$plotter" run.config -o run.pdf >/dev/null && echo && echo "Plot: $out/run.pdf"
fi
