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
