#!/usr/bin/env bash
# Runs every benchmark (not part of the test suite): packaging/setup.sh bench
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build=$(cd "${1:-$here/../../build}" && pwd)
echo "== netperfmeter vs iperf3 and iperf 2: saturated TCP goodput and CPU, 1 and 2 flows"
python3 "$here/throughput.py" "$build/src/app/netperfmeter" --seconds 4 --rounds 5 --flows 1,2
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
echo
echo "== the bundled usrsctp against the system's: saturated SCTP on loopback, CMT over 2 x 10 Mbit/s"
system_build="$build-usrsctp-system"
cmake -S "$here/../.." -B "$system_build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DNPM_USRSCTP=system \
  -DNPM_BUILD_TESTS=OFF -DNPM_WITH_DISSECTORS=OFF -DNPM_WITH_BPF_CC=OFF -DNPM_WITH_RPLOT=OFF >/dev/null
cmake --build "$system_build" --target netperfmeter >/dev/null
python3 "$here/usrsctp_stacks.py" "$build/src/app/netperfmeter" "$system_build/src/app/netperfmeter" \
  --seconds 5 --rounds 5
for bench in "$here"/*/run.sh; do
  [[ -x $bench ]] || continue
  echo
  echo "== $(basename "$(dirname "$bench")")"
  "$bench" "$build"
done
