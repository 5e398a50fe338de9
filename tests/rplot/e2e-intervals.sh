#!/usr/bin/env bash
# End to end: the intervals of plot-netperfmeter-summary (--ci=t|bca|given|none). Its BCa
# intervals against netperfmeter-lab's stats.py on the same numbers (check-bca-lab.R: the same
# arithmetic exactly, the resampled intervals within their Monte Carlo error, the same points
# without one); --seed makes them reproducible; --ci=given draws a table's ci_low/ci_high as they
# are, none where they are NA; bad values are one-line errors.
# Usage: e2e-intervals.sh BUILD_RPLOT_DIR TESTS_DIR WORK_DIR LAB_SOURCE_DIR
set -euo pipefail
rplot=$1 tests=$2 work=$3 lab=$4
. "$tests/lib.sh"
need Rscript r-base-core
need python3 python3
need_npmplot
rm -rf "$work" && mkdir -p "$work"
prog=$rplot/plot-netperfmeter-summary
unquoted() { tr -d '"' <"$1"; }

Rscript "$tests/check-bca-lab.R" "$lab" "$prog" "$work" || fail "npmplot's BCa intervals differ from the lab's"

# A table of 12 runs at two x values; the dumps of two runs with the same seed are the same,
# another seed gives other bounds, the caption's note does not break the figure.
table=$work/runs.data
{ echo "rho Repetition goodput"
  for r in $(seq 1 12); do echo "1 $r $((90 + r * r % 17))"; echo "2 $r $((180 + r * 7 % 23))"; done
} >"$table"
"$prog" "$table" -x rho --ci=bca --seed=11 --dump "$work/a.csv" -o "$work/a.pdf" -q
"$prog" "$table" -x rho --ci=bca --seed=11 --dump "$work/b.csv" -o "$work/b.pdf" -q
"$prog" "$table" -x rho --ci=bca --seed=12 --dump "$work/c.csv" -o "$work/c.pdf" -q
cmp -s "$work/a.csv" "$work/b.csv" || fail "--seed=11 twice gave different intervals"
if cmp -s "$work/a.csv" "$work/c.csv"; then fail "--seed=11 and --seed=12 gave the same intervals"; fi
[[ $(unquoted "$work/a.csv" | grep -c ',bca(4000)$') -eq 2 ]] || fail "the dump names the BCa interval: $(cat "$work/a.csv")"
"$prog" "$table" -x rho --ci=bca --resamples=500 --min-runs=13 --dump "$work/d.csv" -o "$work/d.pdf" -q
[[ $(unquoted "$work/d.csv" | grep -c ',NA,NA,too few runs (n = 12 < 13)$') -eq 2 ]] || fail "--min-runs=13: $(cat "$work/d.csv")"
"$prog" "$table" -x rho --ci=none --dump "$work/e.csv" -o "$work/e.pdf" -q
[[ $(unquoted "$work/e.csv" | grep -c ',NA,NA,none$') -eq 2 ]] || fail "--ci=none: $(cat "$work/e.csv")"
check_pdf_pages "$work/e.pdf" 1

# --ci=given: the bounds of the table, scaled as y; NA and zero width give no bar.
given=$work/given.csv
cat >"$given" <<'TABLE'
rho,Repetition,ci_low,ci_high,procedure,goodput
1,1,9.5,11.5,bca(4000),10
1,2,9.5,11.5,bca(4000),11
2,1,NA,NA,too few runs (n = 2 < 10),20
2,2,NA,NA,too few runs (n = 2 < 10),21
3,1,30,30,stein(n0=2),30
3,2,30,30,stein(n0=2),31
TABLE
"$prog" "$given" -x rho -y goodput --ci=given --y-scale=1000 --dump "$work/g.csv" -o "$work/g.png" --dpi 50 -q
check_png "$work/g.png" 350x250
Rscript -e '
  s <- read.csv(commandArgs(TRUE)[1])
  stopifnot(isTRUE(all.equal(s$Lower, c(9500, NA, NA))), isTRUE(all.equal(s$Upper, c(11500, NA, NA))),
            identical(s$Interval, c("bca(4000)", "too few runs (n = 2 < 10)", "zero-width interval given")))
' "$work/g.csv" || fail "--ci=given: $(cat "$work/g.csv")"
# a dump read back: its Lower/Upper and N
"$prog" "$work/g.csv" -x rho -y Mean --ci=given --dump "$work/h.csv" -o "$work/h.pdf" -q
unquoted "$work/h.csv" | grep -q '^1,2,10500,.*,9500,11500,bca(4000)$' || fail "a dump read back: $(cat "$work/h.csv")"

expect_error "^plot-netperfmeter-summary: --ci: unknown interval wilson (t, bca, given or none)$" \
  "$prog" "$table" -x rho --ci=wilson -o "$work/x.pdf"
expect_error "^plot-netperfmeter-summary: --ci=given needs the columns ci_low and ci_high" \
  "$prog" "$table" -x rho --ci=given -o "$work/x.pdf"
expect_error "^plot-netperfmeter-summary: --seed: -1 is not a valid number" \
  "$prog" "$table" -x rho --ci=bca --seed=-1 -o "$work/x.pdf"
expect_error "^plot-netperfmeter-summary: --resamples: 10 is not a valid number" \
  "$prog" "$table" -x rho --ci=bca --resamples=10 -o "$work/x.pdf"
expect_error "^plot-netperfmeter-summary: --min-runs: 1 is not a valid number" \
  "$prog" "$table" -x rho --min-runs=1 -o "$work/x.pdf"
sed -i 's/^1,2,9.5,/1,2,9.4,/' "$given"
expect_error "column ci_low holds 2 different values at rho=1" \
  "$prog" "$given" -x rho -y goodput --ci=given -o "$work/x.pdf"
[[ ! -e $work/x.pdf ]] || fail "a refused plot left a file"
echo "PASS"
