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

"$npm" "127.0.0.1:$port" -runtime="$runtime" -logfile=active.log \
  -config=run.config -scalar=run.sca.bz2 -vector=run.vec.bz2 --json=run.json \
  -tcp "const0:const1400:const0:const1400:description=TCP bulk" \
  -mptcp "const0:const1400:description=MPTCP bulk" \
  -udp "const50:const500:const25:const1000:description=UDP voice"

echo
echo "Results in $out:"
ls -1 "$out"
echo
# A short summary from the run's JSON document (the same figures as both sides' scalar files):
# per flow and direction, bit rate, frames and lost frames.
python3 - <<'PY'
import json
with open("run.json") as f:
    doc = json.load(f)
print(f"{'Flow':<5} {'Description':<12} {'Protocol':<8} {'Direction':<18} {'Mbit/s':>10} {'Frames':>9} {'Lost':>6}")
for flow in doc["flows"]:
    for key, label in (("active_to_passive", "active -> passive"), ("passive_to_active", "passive -> active")):
        d = flow[key]
        if not d["transmitted"] or not d["transmitted"]["frames"]:
            continue
        received, lost = d["received"] or {}, d["lost"] or {}
        print(f"{flow['flow_id']:<5} {flow['description']:<12} {flow['protocol']:<8} {label:<18} "
              f"{(received.get('bit_rate') or 0) / 1e6:>10.1f} {received.get('frames', 0):>9} {lost.get('frames', 0):>6}")
PY
plotter=$build/rplot/plot-netperfmeter-results   # loads the R package built into $build/rplot/library
if [[ -x $plotter ]] && command -v Rscript >/dev/null; then
  "$plotter" run.config -o run.pdf >/dev/null && echo && echo "Plot: $out/run.pdf"
fi
