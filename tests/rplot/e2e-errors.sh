#!/usr/bin/env bash
# Mistakes a user can make give one clear line and a non-zero exit, no R traceback,
# and leave no half-written output. Usage: e2e-errors.sh BUILD_RPLOT_DIR TESTS_DIR WORK_DIR
set -euo pipefail
rplot=$1 tests=$2 work=$3
. "$tests/lib.sh"
need Rscript r-base-core
need_npmplot
rm -rf "$work" && mkdir -p "$work"
results=$rplot/plot-netperfmeter-results
summary=$rplot/plot-netperfmeter-summary
Rscript "$SYNTHETIC_RUN" "$work/run" run
cfg=$work/run/run.config

expect_error "config file $work/nope.config does not exist" "$results" "$work/nope.config"
expect_error "is a directory" "$results" "$work"
expect_error "expected exactly one config file" "$results"
expect_error "unknown option --frobnicate" "$results" "$cfg" --frobnicate
expect_error "unknown format gif" "$results" "$cfg" --format=gif
expect_error "time-range 5:1 is empty" "$results" "$cfg" -t 5:1
expect_error "not FROM:TO" "$results" "$cfg" -t 5
expect_error "no samples between 100 and 200 s" "$results" "$cfg" -n -t 100:200 -o "$work/x.pdf"
expect_error "output directory $work/missing does not exist" "$results" "$cfg" -o "$work/missing/x.pdf"
printf 'NUM_FLOWS=1\nthis line is junk\n' >"$work/junk.config"
expect_error "junk.config:2: expected KEY=value" "$results" "$work/junk.config"
printf 'NUM_FLOWS=1\nFLOW0_DESCRIPTION="open\n' >"$work/open.config"
expect_error "unterminated quote" "$results" "$work/open.config"
cp -r "$work/run" "$work/broken"
head -c 300 "$work/run/run-active.vec.bz2" >"$work/broken/run-active.vec.bz2"  # truncated
expect_error "run-active.vec.bz2 gives no text (a truncated or corrupt compressed file?)" "$results" "$work/broken/run.config" -o "$work/broken.pdf"
[[ ! -e $work/broken.pdf ]] || fail "a failed run left a PDF"
ls "$work"/.npmplot-* 2>/dev/null && fail "temporary files left behind"
echo "not a vector" >"$work/broken/run-active.vec.bz2"
expect_error "run-active.vec.bz2 does not have the header of a measurement vector" \
  "$results" "$work/broken/run.config"
cp "$work/run/run-active.vec.bz2" "$work/broken/"
rm "$work/broken/run-passive.vec.bz2"
expect_error "passive measurement vector run-passive.vec.bz2 does not exist" \
  "$results" "$work/broken/run.config"
cp "$work/run/run-passive.vec.bz2" "$work/broken/"

# A corrupt scalar file is an error naming it (before: ignored, the figures made without it);
# one the config names but that is missing, a warning.
echo "scalar \"netPerfMeter.active.totalCPU\" \"Idle\"" | bzip2 >"$work/broken/run-active.sca.bz2"
expect_error "scalar file $work/broken/run-active.sca.bz2: line 1 is not a scalar row" \
  "$results" "$work/broken/run.config" -o "$work/broken.pdf"
head -c 200 "$work/run/run-passive.sca.bz2" >"$work/broken/run-passive.sca.bz2"
cp "$work/run/run-active.sca.bz2" "$work/broken/"
expect_error "scalar file $work/broken/run-passive.sca.bz2 gives no text (a truncated or corrupt compressed file?)" \
  "$results" "$work/broken/run.config" -o "$work/broken.pdf"
[[ ! -e $work/broken.pdf ]] || fail "a failed run left a PDF"
rm "$work/broken/run-passive.sca.bz2"
err=$("$results" "$work/broken/run.config" -q -n -o "$work/nosca.pdf" 2>&1 >/dev/null) || fail "a missing scalar file is fatal: $err"
grep -q "^plot-netperfmeter-results: warning: .*passive scalar file run-passive.sca.bz2 does not exist; plotted without it" <<<"$err" ||
  fail "no warning for the missing scalar file: $err"
cp "$work/run/run-passive.sca.bz2" "$work/broken/"

# Decompression bombs: 300 MB of zeros are 242 bytes of bzip2. Refused at the default bound of
# text inputs (64 MiB) with no more memory than that bound and as much again beyond what the
# program needs anyway (its --version); before, taken whole (430 MB more than that).
head -c 300M /dev/zero | bzip2 >"$work/bomb.bz2"
cp "$work/bomb.bz2" "$work/broken/run-active.sca.bz2"
expect_error "scalar file $work/broken/run-active.sca.bz2 decompresses to more than 64 MiB, the bound for config, scalar and table files (the default; raise it with --max-input-size or NPM_RPLOT_MAX_INPUT_SIZE)" \
  "$results" "$work/broken/run.config" -o "$work/broken.pdf"
expect_error "table $work/bomb.bz2 decompresses to more than 64 MiB" "$summary" "$work/bomb.bz2" -x a
if [[ -x /usr/bin/time ]]; then
  rss() { /usr/bin/time -f "%M" -o "$work/rss" "$@" >/dev/null 2>&1 || true; tail -1 "$work/rss"; }
  base=$(rss "$summary" --version)
  used=$(rss "$summary" "$work/bomb.bz2" -x a)
  echo "max RSS: $used kB with the bomb, $base kB for --version"
  ((used <= base + 2 * 65536)) || fail "reading the bomb took $used kB, more than $base kB + 2 x 64 MiB"
else
  echo "(/usr/bin/time is missing: the memory the bomb takes is not measured)"
fi
cp "$work/run/run-active.sca.bz2" "$work/broken/"
# A lowered bound, by option and by environment; the measurement vector is refused at it.
bound=$(($(stat -c %s "$work/broken/run.config") + 10))     # the config passes, its vector does not
((bound < $(bzcat "$work/broken/run-active.vec.bz2" | wc -c))) || fail "the synthetic vector is too small for this test"
expect_error "measurement vector $work/broken/run-active.vec.bz2 decompresses to more than $bound bytes, the bound for every input (set by --max-input-size" \
  "$results" "$work/broken/run.config" --max-input-size=$bound
NPM_RPLOT_MAX_INPUT_SIZE=2k expect_error "config file $work/broken/run.config holds more than 2 kB, the bound for every input (set by NPM_RPLOT_MAX_INPUT_SIZE" \
  "$results" "$work/broken/run.config"
expect_error "max-input-size lots is not a size" "$results" "$work/broken/run.config" --max-input-size=lots

table=$work/t.data
printf 'RunNo\tValueNo\tSplit\tFlow\tGamma rho\tthroughput\n' >"$table"
for g in cmt like-mptcp; do for r in 1 2; do for n in 1 2 3; do
  printf '0\t%d\t""\t0\t%s %d\t%d\n' "$n" "$g" "$r" "$((r * 100 + n))" >>"$table"
done; done; done
expect_error "table $work/none.data does not exist" "$summary" "$work/none.data" -x rho
expect_error "no column rhoo in the table (columns: RunNo, ValueNo, Split, Flow, Gamma, rho, throughput)" \
  "$summary" "$table" -x rhoo
expect_error "no column Nope" "$summary" "$table" -x rho -c Nope
expect_error "choose the x column with -x" "$summary" "$table"
expect_error "no rows left after filtering" "$summary" "$table" -x rho -F 'Gamma == "reno"'
expect_error "cannot parse filter" "$summary" "$table" -x rho -F 'Gamma =='
expect_error "filter Nope > 1 failed" "$summary" "$table" -x rho -F 'Nope > 1'
expect_error "column Gamma (y) is not numeric" "$summary" "$table" -x rho -y Gamma
expect_error "unknown unit furlong" "$summary" "$table" -x rho --y-unit=furlong:m
expect_error "confidence" "$summary" "$table" -x rho --confidence=abc
expect_error "value-label" "$summary" "$table" -x rho --value-label=nocolumn
expect_error "unknown format" "$summary" "$table" -x rho -o "$work/x.gif" -f gif
printf 'a b\n' >"$work/header-only.data"
expect_error "has no rows" "$summary" "$work/header-only.data" -x a
echo "garbage" >"$work/bad.data.bz2"
expect_error "bad.data.bz2" "$summary" "$work/bad.data.bz2" -x a
printf 'a b\n1 2 3 4\n' >"$work/ragged.data"
expect_error "cannot parse table" "$summary" "$work/ragged.data" -x a
echo "PASS"
