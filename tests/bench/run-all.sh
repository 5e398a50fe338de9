#!/usr/bin/env bash
# Runs every benchmark (not part of the test suite): packaging/setup.sh bench
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build=$(cd "${1:-$here/../../build}" && pwd)
echo "== netperfmeter vs iperf3: saturated TCP goodput and CPU"
python3 "$here/throughput.py" "$build/src/app/netperfmeter" --seconds 5 --rounds 3
echo
echo "== network threads: 2 and 4 saturated TCP flows, --threads=1 and 2"
python3 "$here/threads.py" "$build/src/app/netperfmeter" --seconds 5 --rounds 3
echo
echo "== per-path sampling: saturated TCP with --path-interval=0 / 100 / 10"
python3 "$here/path_sampling.py" "$build/src/app/netperfmeter" --seconds 5 --rounds 5
echo
echo "== many flows: 1000 and 10000 rate-driven TCP flows (set-up, stop, frames per flow)"
python3 "$here/many_flows.py" "$build/src/app/netperfmeter" --flows 1000
python3 "$here/many_flows.py" "$build/src/app/netperfmeter" --flows 10000
for bench in "$here"/*/run.sh; do
  [[ -x $bench ]] || continue
  echo
  echo "== $(basename "$(dirname "$bench")")"
  "$bench" "$build"
done
