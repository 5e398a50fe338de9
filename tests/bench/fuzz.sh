#!/usr/bin/env bash
# libFuzzer over every target that parses untrusted input (tests/fuzz/fuzz_targets.h: npmp,
# flowspec, scalar, vector, json, config, table, quic, cli). The gating suite runs the deterministic driver,
# fuzz_smoke, under ASan+UBSan; the long tier runs this script as the test fuzz_libfuzzer.
#
#   tests/bench/fuzz.sh [RUNS] [BUILD_DIR]      RUNS per target, default 10000000
#
# Builds npm_fuzz_<target> with clang (-fsanitize=fuzzer,address,undefined; CC=clang CXX=clang++,
# the Build-Depends clang and libclang-rt-14-dev) in BUILD_DIR (default build-fuzz), two jobs at
# a time (NPM_FUZZ_JOBS), seeds each corpus from the corpus kept in the tree
# (tests/fuzz/corpus/TARGET/; builtin-seed-* are the driver's built-in seeds, npm_fuzz_smoke
# --seeds DIR writes them), runs each target for RUNS executions on one core, and
# prints per target: executions, seconds, executions/s, corpus size, coverage and whether it
# crashed. Exit status 1 on a crash or a build failure; the crashing input is left in
# BUILD_DIR/fuzz-out/TARGET/ (crash-*): fix the cause and add the input to
# tests/fuzz/corpus/TARGET/, where fuzz_smoke runs it every time.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
runs=${1:-10000000}
build=${2:-$root/build-fuzz}
targets=(npmp flowspec scalar vector json config table quic cli)

command -v clang++ >/dev/null || { echo "fuzz.sh: clang++ is needed (apt-get install clang libclang-rt-14-dev)" >&2; exit 1; }
log=$build/fuzz-build.log
mkdir -p "$build"
if ! CC=clang CXX=clang++ cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
       -DNPM_LIBFUZZER=ON >"$log" 2>&1 ||
   ! cmake --build "$build" -j "${NPM_FUZZ_JOBS:-2}" --target "${targets[@]/#/npm_fuzz_}" >>"$log" 2>&1; then
  echo "fuzz.sh: the fuzz build failed; the end of $log:" >&2
  tail -n 20 "$log" >&2
  exit 1
fi

out=$build/fuzz-out
rm -rf "$out"
mkdir -p "$out"
status=0
printf '%-10s %12s %8s %10s %7s %6s %s\n' target executions seconds "execs/s" corpus cov result
for target in "${targets[@]}"; do
  mkdir -p "$out/$target/corpus"
  cp "$root/tests/fuzz/corpus/$target"/* "$out/$target/corpus/" 2>/dev/null || true
  if [ -z "$(ls "$out/$target/corpus")" ]; then
    echo "fuzz.sh: no seeds for $target" >&2
    exit 1
  fi
  log=$out/$target/log
  start=$(date +%s.%N)
  rc=0
  max_len=4096
  [ "$target" = quic ] && max_len=8192  # several datagrams of at least 1200 bytes each
  (cd "$out/$target" && "$build/tests/fuzz/npm_fuzz_$target" -runs="$runs" -max_len=$max_len \
     -print_final_stats=1 corpus >"$log" 2>&1) || rc=$?
  end=$(date +%s.%N)
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
  corpus=$(find "$out/$target/corpus" -type f | wc -l)
  result="no crash"
  if [[ $rc -ne 0 ]]; then
    result="CRASH (exit $rc, see $log)"
    status=1
  elif [[ ${execs:-0} -lt $runs ]]; then
    result="only ${execs:-0} of $runs executions (see $log)"
    status=1
  fi
  awk -v t="$target" -v e="${execs:-0}" -v s="$start" -v f="$end" -v c="$corpus" -v v="${cov:-?}" -v r="$result" \
    'BEGIN { d = f - s; printf "%-10s %12d %8.0f %10.0f %7d %6s %s\n", t, e, d, e / d, c, v, r }'
done
exit $status
