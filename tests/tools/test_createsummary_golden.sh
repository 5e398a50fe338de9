#!/usr/bin/env bash
# Golden tests of createsummary: hand-written scalar files (plain, .bz2 multi-stream, old
# whitespace-separated layout, OMNeT++), expected tables written out by hand in data/.
source "$(dirname "$0")/lib.sh"
BIN=$1
DATA=$2
setup_tmp

# ------ NetPerfMeter scalar files: per-flow, total, CPU, skip list, quoting, numeric order
cp -r "$DATA/netperfmeter" "$TMP/npm"
cd "$TMP/npm" || exit 1
# The old-layout file as two concatenated bzip2 streams (as pbzip2/parallel writers make).
head -c 100 old/run-active.sca | bzip2 -9 >old/run-active.sca.bz2
tail -c +101 old/run-active.sca | bzip2 -9 >>old/run-active.sca.bz2
rm old/run-active.sca

if "$BIN/createsummary" -b -q <commands >stdout.txt 2>stderr.txt; then
  pass "createsummary on NetPerfMeter files"
else
  fail "createsummary exit code $? ($(cat stderr.txt))"
fi
grep -q "^Wrote 16 lines into 4 files" stdout.txt || fail "summary line: $(cat stdout.txt)"
[ -s stderr.txt ] && fail "unexpected stderr: $(cat stderr.txt)"
for t in active.flow-ReceivedBitRate active.total-ReceivedBytes active.CPU-Idle \
         active.totalCPU-HardwareInterrupts; do
  check_table "out/$t.data.bz2" "expected/$t.data"
done
[ "$(ls out | wc -l)" -eq 4 ] || fail "unexpected files in out/: $(ls out)"

# One worker thread gives the same tables as many.
sed 's/--resultsdirectory=out/--resultsdirectory=one/' commands | "$BIN/createsummary" -b -q -j 1 >/dev/null
sed 's/--resultsdirectory=out/--resultsdirectory=many/' commands | "$BIN/createsummary" -b -q -j 7 >/dev/null
if diff -r one many >/dev/null && [ "$(ls one | wc -l)" -eq 4 ]; then
  pass "-j 1 and -j 7 give identical tables"
else
  fail "-j 1 and -j 7 differ"
fi

# Strict CSV layout, plain output (-c 0).
"$BIN/createsummary" -b -q --csv -c 0 <commands >/dev/null || fail "--csv exit code $?"
check_table out/active.flow-ReceivedBitRate.csv expected/active.flow-ReceivedBitRate.csv

# Line numbers; -c 0 removes the .bz2 variant of the same table.
"$BIN/createsummary" --batch --quiet --compress=0 --line-numbers <commands >/dev/null ||
  fail "-l exit code $?"
check_table out/active.CPU-Idle.data expected/active.CPU-Idle.numbered.data
[ -e out/active.CPU-Idle.data.bz2 ] && fail "old .data.bz2 variant not removed"

# Old single-dash spelling of the options (as in old scripts) and short options.
rm -rf out
"$BIN/createsummary" "Protocol Size" -batch -quiet -compress=9 <commands >/dev/null ||
  fail "old-style options: exit code $?"
check_table out/active.total-ReceivedBytes.data.bz2 expected/active.total-ReceivedBytes.data
rm -rf out
"$BIN/createsummary" -bq -c 5 <commands >/dev/null || fail "-bq -c 5: exit code $?"
check_table out/active.total-ReceivedBytes.data.bz2 expected/active.total-ReceivedBytes.data
"$BIN/createsummary" -b -q -a -p -c1 <commands >/dev/null || fail "-a -p -c1: exit code $?"

# ------ OMNeT++ scalar file: runs, statistic/field, #N suffix, split ---------------------
cp -r "$DATA/omnetpp" "$TMP/omnet"
cd "$TMP/omnet" || exit 1
"$BIN/createsummary" Seed --batch -q --splitall --compress 0 <commands >stdout.txt 2>&1 ||
  fail "createsummary on OMNeT++ file: exit code $? ($(cat stdout.txt))"
for f in expected/*.data; do
  check_table "$(basename "$f")" "$f"
done

finish
