#!/usr/bin/env bash
# libFuzzer over every target that parses untrusted input (not part of the test suite; the
# suite runs the deterministic driver, fuzz_smoke, under ASan+UBSan):
#
#   tests/bench/fuzz.sh [RUNS] [BUILD_DIR]      RUNS per target, default 10000000
#
# Builds npm_fuzz_npmp and npm_fuzz_flowspec with clang (-fsanitize=fuzzer,address,undefined)
# in BUILD_DIR (default build-fuzz), seeds each corpus from the driver's seeds, runs each
# target for RUNS executions on one core, and prints per target: executions, seconds,
# executions/s, corpus size, coverage and whether it crashed. Exit status 1 on a crash; the
# crashing input is left in BUILD_DIR/fuzz-out/TARGET/ (crash-*).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
runs=${1:-10000000}
build=${2:-$root/build-fuzz}

command -v clang++ >/dev/null || { echo "fuzz.sh: clang++ is needed (apt-get install clang)" >&2; exit 1; }
CC=clang CXX=clang++ cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DNPM_LIBFUZZER=ON >/dev/null
cmake --build "$build" --target npm_fuzz_npmp npm_fuzz_flowspec npm_fuzz_smoke >/dev/null

out=$build/fuzz-out
rm -rf "$out"
mkdir -p "$out"
"$build/tests/fuzz/npm_fuzz_smoke" --seeds "$out/seeds"

status=0
printf '%-10s %12s %8s %10s %7s %6s %s\n' target executions seconds "execs/s" corpus cov result
for target in npmp flowspec; do
  mkdir -p "$out/$target/corpus"
  cp "$out/seeds/$target"/* "$out/$target/corpus/"
  log=$out/$target/log
  start=$(date +%s.%N)
  rc=0
  (cd "$out/$target" && "$build/tests/fuzz/npm_fuzz_$target" -runs="$runs" -max_len=4096 \
     -print_final_stats=1 corpus >"$log" 2>&1) || rc=$?
  end=$(date +%s.%N)
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
  corpus=$(find "$out/$target/corpus" -type f | wc -l)
  result="no crash"
  if [[ $rc -ne 0 ]]; then
    result="CRASH (exit $rc, see $log)"
    status=1
  fi
  awk -v t="$target" -v e="${execs:-0}" -v s="$start" -v f="$end" -v c="$corpus" -v v="${cov:-?}" -v r="$result" \
    'BEGIN { d = f - s; printf "%-10s %12d %8.0f %10.0f %7d %6s %s\n", t, e, d, e / d, c, v, r }'
done
exit $status
