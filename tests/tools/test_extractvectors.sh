#!/usr/bin/env bash
# extractvectors: OMNeT++ version-2 vector files.
source "$(dirname "$0")/lib.sh"
BIN=$1
DATA=$2
EV="$BIN/extractvectors"
setup_tmp
cp -r "$DATA/vectors" "$TMP/v"
cd "$TMP/v" || exit 1

"$EV" results.vec out.data.bz2 "end to" '!queue' -q || fail "selected: exit code $?"
check_table out.data.bz2 expected-selected.data
# The output's compression by its name, as combinesummaries: .gz is gzip, and gzip input is read.
"$EV" results.vec out.data.gz "end to" '!queue' -q || fail "gzip output: exit code $?"
check_table out.data.gz expected-selected.data
gzip -c results.vec >results-gz.vec.gz
"$EV" results-gz.vec.gz out2.data "end to" '!queue' -q || fail "gzip input: exit code $?"
check_table out2.data expected-selected.data
bzip2 -k results.vec
out=$("$EV" results.vec.bz2 all.data --line-numbers)
check_table all.data expected-all-numbered.data
grep -q 'Adding vector "throughput" of object net.sink' <<<"$out" && pass "Adding vector lines" ||
  fail "no Adding vector lines: $out"
err=$("$EV" results.vec x.data -q "end" "nonexistent" 2>&1 >/dev/null)
grep -q 'found only 1 of 2 specified vector prefixes: "nonexistent"' <<<"$err" &&
  pass "warning for a prefix that matched nothing" || fail "prefix warning: $err"
"$EV" results.vec split.data -q --split "queue" && grep -q '"queue length"	"3"' split.data &&
  pass "--split" || fail "--split: $(cat split.data)"

sed 's/^version 2/version 3/' results.vec >v3.vec
tail -n +2 results.vec >noversion.vec
sed 's/^3\t0.7\t100/7\t0.7\t100/' results.vec >undeclared.vec
sed 's/^1\t20\t1.25\t0.002/1\t20\tx\t0.002/' results.vec >badnumber.vec
bzip2 -c results.vec | head -c 150 >trunc.vec.bz2
expect_fail "version 3" 'v3.vec:1: vector file version 3 is not supported' "$EV" v3.vec o.data
expect_fail "no version line" 'noversion.vec:1: missing "version" line' "$EV" noversion.vec o.data
expect_fail "undeclared vector" 'undeclared.vec:10: data for vector 7, which was not declared' \
  "$EV" undeclared.vec o.data
expect_fail "bad number" 'badnumber.vec:12: bad number "x" in column T' "$EV" badnumber.vec o.data
expect_fail "truncated .bz2" 'trunc.vec.bz2: truncated bzip2 data' "$EV" trunc.vec.bz2 o.data
expect_fail "missing input" 'cannot open missing.vec' "$EV" missing.vec o.data
expect_fail "one argument" 'input and output file names expected' "$EV" results.vec
[ -e o.data ] && fail "output left behind by a failed run" || pass "failed runs leave no output"
{ echo "version 2"; head -c $((3 << 20)) /dev/zero | tr '\0' x; echo; } >longline.vec
expect_fail "a 3 MiB line" 'longline.vec:2: a line longer than 1 MiB' "$EV" longline.vec o.data
finish
