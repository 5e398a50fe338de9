#!/usr/bin/env bash
# Demo measurement on loopback: a local passive and a 5 s active run with a TCP, an MPTCP
# and a UDP flow; results (config, scalars, vectors, plot) in ./demo-results.
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
  -config=run.config -scalar=run.sca.bz2 -vector=run.vec.bz2 \
  -tcp "const0:const1400:const0:const1400:description=TCP bulk" \
  -mptcp "const0:const1400:description=MPTCP bulk" \
  -udp "const50:const500:const25:const1000:description=UDP voice"

echo
echo "Results in $out:"
ls -1 "$out"
echo
# A short summary from the scalar files: per flow and direction, bit rate and frames.
python3 - <<'PY'
import bz2, re
pattern = re.compile(r'^scalar\s+"netPerfMeter\.(\w+)\.flow\[(\d+)\]"\s+"([^"]+)"\s+(\S+)')
values = {}
for role in ("active", "passive"):
    for line in bz2.open(f"run-{role}.sca.bz2", "rt"):
        m = pattern.match(line)
        if m:
            values[(m.group(1), int(m.group(2)), m.group(3))] = float(m.group(4))
config = {}
for line in open("run.config"):
    key, _, value = line.strip().partition("=")
    config[key] = value.strip('"')
print(f"{'Flow':<5} {'Description':<12} {'Protocol':<8} {'Direction':<18} {'Mbit/s':>10} {'Frames':>9} {'Lost':>6}")
for flow in sorted({f for (_, f, _) in values}):
    for sender, receiver, label in (("active", "passive", "active -> passive"), ("passive", "active", "passive -> active")):
        sent = values.get((sender, flow, "Transmitted Frames"), 0)
        if not sent:
            continue
        rate = values.get((receiver, flow, "Received Bit Rate"), 0) / 1e6
        got = values.get((receiver, flow, "Received Frames"), 0)
        lost = values.get((receiver, flow, "Lost Frames"), 0)
        print(f"{flow:<5} {config.get(f'FLOW{flow}_DESCRIPTION', ''):<12} {config.get(f'FLOW{flow}_PROTOCOL', ''):<8} "
              f"{label:<18} {rate:>10.1f} {int(got):>9} {int(lost):>6}")
PY
plotter=$build/rplot/plot-netperfmeter-results   # loads the R package built into $build/rplot/library
if [[ -x $plotter ]] && command -v Rscript >/dev/null; then
  "$plotter" run.config -o run.pdf >/dev/null && echo && echo "Plot: $out/run.pdf"
fi
