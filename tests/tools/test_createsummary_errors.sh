#!/usr/bin/env bash
# Bad input never produces a wrong table: every case below must exit 1 with a message naming
# the file and line (or warn and skip with -r), and leave no half-written table behind.
source "$(dirname "$0")/lib.sh"
BIN=$1  # ($2, the data directory every tools test is given, is not needed here)
CS="$BIN/createsummary"
setup_tmp
cd "$TMP" || exit 1

good='scalar "netPerfMeter.active.flow[0]" "Received Bit Rate" 1000
scalar "netPerfMeter.active.total" "Received Bytes" 5'
echo "$good" >good.sca
echo "$good" | bzip2 >good.sca.bz2
seq 1 20000 | sed 's/.*/scalar "netPerfMeter.active.flow[&]" "Received Bit Rate" &.5/' |
  bzip2 >big.sca.bz2
seq 1 80000 | sed 's/.*/scalar "netPerfMeter.active.flow[&]" "Received Bit Rate" &.5/' |
  bzip2 >huge.sca.bz2
head -c $(($(stat -c %s huge.sca.bz2) / 2)) huge.sca.bz2 >truncated.sca.bz2
printf 'scalar "netPerfMeter.active.flow[0]" "Received Bit Rate" 1\nscalar "x.a" "b" 12abc\n' >badvalue.sca
printf 'scalar "netPerfMeter.active.flow[0]" "Received Bit Rate" 1\n\x01\x02garbage\n' >garbage.sca
printf 'scalar "netPerfMeter.active.flow[0]" "Received Bit Rate 1\n' >badquote.sca
printf 'scalar "netPerfMeter.active.flow" "Received Bit Rate" 1\n' >noindex.sca
printf 'BZh91AY&SYgarbage-garbage-garbage' >corrupt.sca.bz2

run() { # run <commands> [options]: createsummary in batch mode on the given commands
  local commands=$1
  shift
  printf '%b' "$commands" | "$CS" -b -q "$@"
}
no_tables() {
  if compgen -G "$1/*" >/dev/null; then
    fail "$2: files left behind: $(ls "$1")"
  else
    pass "$2: nothing written"
  fi
}

mkdir o1
expect_fail "missing input" "createsummary: error: cannot open missing.sca: No such file" \
  run '--resultsdirectory=o1\n--values=a\n--input=good.sca\n--values=b\n--input=missing.sca\n' Run
no_tables o1 "missing input"
expect_fail "truncated .bz2" "truncated.sca.bz2: truncated bzip2 data \(after line [0-9]+\)" \
  run '--resultsdirectory=o1\n--values=a\n--input=truncated.sca.bz2\n' Run
no_tables o1 "truncated .bz2"
expect_fail "corrupt .bz2" "corrupt.sca.bz2: (corrupt|truncated) bzip2 data" \
  run '--resultsdirectory=o1\n--values=a\n--input=corrupt.sca.bz2\n' Run
expect_fail "non-numeric value" '^createsummary: error: badvalue.sca:2: numeric value expected, got "12abc"' \
  run '--resultsdirectory=o1\n--values=a\n--input=badvalue.sca\n' Run
expect_fail "garbage line" 'garbage.sca:2: not a scalar file line' \
  run '--resultsdirectory=o1\n--values=a\n--input=garbage.sca\n' Run
expect_fail "unterminated quote" 'badquote.sca:1: statistic name expected' \
  run '--resultsdirectory=o1\n--values=a\n--input=badquote.sca\n' Run
expect_fail "aggregates differ within one table" \
  'noindex.sca:1: scalar of table active.flow-ReceivedBitRate has aggregate columns ""' \
  run '--resultsdirectory=o1\n--values=a\n--input=good.sca\n--values=b\n--input=noindex.sca\n' Run
no_tables o1 "bad lines"

expect_fail "--values with too many fields" \
  '<stdin>:4: --values=tcp 1 extra has 3 fields, but there are 2 variable names \(Protocol Size\)' \
  run '--varnames=Protocol Size\n--values=tcp 1\n--input=good.sca\n--values=tcp 1 extra\n--input=good.sca\n'
expect_fail "--values with too few fields (quoted field counts once)" \
  '<stdin>:1: --values="a b"  has 1 fields, but there are 2' \
  run '--values="a b" \n--input=good.sca\n' "Protocol Size"
expect_fail "--varnames changing the column count" '<stdin>:3: --varnames gives 1 names' \
  run '--values=tcp 1\n--input=good.sca\n--varnames=Protocol\n' "Protocol Size"
expect_fail "--input without --values" '<stdin>:1: --input=good.sca without a preceding --values=' \
  run '--input=good.sca\n' Run
expect_fail "unbalanced quotes in --values" '<stdin>:1: unbalanced quotes in --values' \
  run '--values=a "b\n--input=good.sca\n' "Run Protocol"
expect_fail "invalid command in batch mode" '<stdin>:2: invalid command "--bogus=1"' \
  run '--values=a\n--bogus=1\n--input=good.sca\n' Run
no_tables o1 "command errors"

# Interactive mode reports a bad command and goes on.
mkdir o2
out=$(printf -- '--resultsdirectory=o2\n--bogus\n--values=a\n--input=good.sca\n' |
  "$CS" Run -i 2>err.txt)
rc=$?
if [ $rc -eq 0 ] && grep -q "Ready> " <<<"$out" && grep -q 'invalid command "--bogus"' err.txt &&
   [ -e o2/active.flow-ReceivedBitRate.data.bz2 ]; then
  pass "interactive mode continues after a bad command"
else
  fail "interactive mode: rc=$rc out=$out err=$(cat err.txt)"
fi

# -r: warn and skip; --statusfile of a failed input is deleted, --logfile is named.
mkdir o3
touch status-ok status-bad
out=$(printf -- '--resultsdirectory=o3\n--values=1\n--statusfile=status-ok\n--input=good.sca\n--values=2\n--logfile=run2.log\n--statusfile=status-bad\n--input=truncated.sca.bz2\n--values=3\n--input=missing.sca\n--values=4\n--input=good.sca.bz2\n' |
  "$CS" Run -b -q -r 2>err.txt)
rc=$?
if [ $rc -ne 0 ]; then
  fail "-r: exit code $rc ($(cat err.txt))"
else
  grep -q "warning: .*truncated.sca.bz2: truncated bzip2 data.* - skipping" err.txt &&
    grep -q "warning: cannot open missing.sca" err.txt && grep -q "see log file run2.log" err.txt &&
    grep -q "skipped 2 of 4 input files" err.txt &&
    pass "-r warns about both bad inputs" || fail "-r messages: $(cat err.txt)"
  [ -e status-ok ] && [ ! -e status-bad ] && pass "status file of the failed input deleted" ||
    fail "status files: $(ls status-*)"
  printf 'RunNo\tValueNo\tSplit\tactive.flow\tRun\tactive.flow-ReceivedBitRate\n0\t1\t""\t0\t1\t1000.000000\n0\t1\t""\t0\t4\t1000.000000\n' >exp1
  check_table o3/active.flow-ReceivedBitRate.data.bz2 exp1
fi

# Same with the command instead of the option.
mkdir o4
printf -- '--ignore-scalar-file-errors\n--resultsdirectory=o4\n--values=1\n--input=missing.sca\n--values=2\n--input=good.sca\n' |
  "$CS" Run -b -q 2>/dev/null && [ -e o4/active.total-ReceivedBytes.data.bz2 ] &&
  pass "--ignore-scalar-file-errors command" || fail "--ignore-scalar-file-errors command"

# SIGINT while tables are being written: exit 130, no temporary files, only complete tables.
mkdir o5
seq 1 20000 | sed 's/.*/scalar "n.t&x" "v" &/' >many.sca
printf -- '--resultsdirectory=o5\n--values=a\n--input=many.sca\n' >many.commands
"$CS" -b -q -j 1 Run <many.commands >/dev/null 2>int.txt &
pid=$!
for _ in $(seq 1 100); do compgen -G "o5/*" >/dev/null && break; sleep 0.05; done
kill -INT $pid
wait $pid
rc=$?
if [ $rc -eq 130 ] && grep -q "interrupted" int.txt; then
  pass "SIGINT: exit code 130 after $(ls o5 | wc -l) of 20000 tables"
else
  fail "SIGINT: exit code $rc ($(cat int.txt))"
fi
compgen -G "o5/*.tmp-*" >/dev/null && fail "SIGINT left temporary files: $(cd o5 && printf '%s\n' *tmp*)"
for f in o5/*.bz2; do bzip2 -t "$f" 2>/dev/null || fail "SIGINT left an incomplete $f"; done

# ------ Command line -----------------------------------------------------------------------
expect_fail "-c 10" "invalid compression level \"10\"" "$CS" -c 10
expect_fail "-c x" "invalid compression level \"x\"" "$CS" -c x
expect_fail "-t (INTERNAL ERROR in the reference)" "unknown option -t" "$CS" -t
expect_fail "two positional arguments" "unexpected argument" "$CS" a b
"$CS" --help | grep -q -- "--ignore-scalar-file-errors" && pass "--help" || fail "--help"
"$CS" -v | grep -q "^CreateSummary [0-9]" && pass "-v" || fail "-v"

# ------ Read-only directory and full disk (needs root for mount) --------------------------
if [ "$(id -u)" -ne 0 ] || ! mount -t tmpfs -o size=64k tmpfs "$TMP/o1" 2>/dev/null; then
  echo "SKIP: cannot mount a tmpfs (not root?)" >&2
  exit 77
fi
MOUNTS+=("$TMP/o1")
mkdir ro
mount -t tmpfs -o ro,size=64k tmpfs "$TMP/ro" && MOUNTS+=("$TMP/ro")
expect_fail "read-only results directory" "cannot create ro/active.*Read-only file system" \
  run '--resultsdirectory=ro\n--values=a\n--input=good.sca\n' Run

# Full disk: the plain tables of big.sca.bz2 need ~700 kB; the tmpfs has 64 kB.
expect_fail "full disk" "cannot write o1/.*No space left on device" \
  run '--resultsdirectory=o1\n--values=a\n--input=big.sca.bz2\n--values=b\n--input=good.sca\n' Run -c 0
if compgen -G "o1/*.tmp-*" >/dev/null; then
  fail "temporary files left on the full disk: $(ls o1)"
else
  pass "no temporary files left on the full disk"
fi
# Whatever was committed before the disk filled up is complete.
for f in o1/*; do
  [ -e "$f" ] || continue
  tail -1 "$f" | grep -qE '\.[0-9]{6}$' || fail "incomplete table $f"
done
[ -e o1/active.flow-ReceivedBitRate.data ] && fail "the big table exists although the disk was full"
# Compressed, the same run fits.
rm -f o1/*
run '--resultsdirectory=o1\n--values=a\n--input=big.sca.bz2\n' Run >/dev/null &&
  [ "$(bzip2 -dc o1/active.flow-ReceivedBitRate.data.bz2 | wc -l)" -eq 20001 ] &&
  pass "compressed tables fit into the small tmpfs" || fail "compressed run on the small tmpfs"
# gzip CSV (~100 kB for big.sca.bz2) does not fit either: one line on stderr, exit 1, no
# temporary files, and the table written before (same name) is still there, whole.
rm -f o1/*
run '--resultsdirectory=o1\n--values=a\n--input=good.sca\n' Run --csv --compression=gzip >/dev/null ||
  fail "small gzip CSV run"
before=$(gzip -dc o1/active.flow-ReceivedBitRate.csv.gz)
err=$(run '--resultsdirectory=o1\n--values=a\n--input=big.sca.bz2\n--values=b\n--input=good.sca\n' Run \
  --csv --compression=gzip 2>&1 >/dev/null)
rc=$?
if [ $rc -eq 1 ] && [ "$(wc -l <<<"$err")" -eq 1 ] &&
   grep -qE "^createsummary: error: cannot write o1/.*No space left on device" <<<"$err"; then
  pass "full disk with gzip -> $err"
else
  fail "full disk with gzip: exit code $rc, stderr: $err"
fi
compgen -G "o1/*.tmp-*" >/dev/null && fail "gzip: temporary files left on the full disk: $(ls o1)"
for f in o1/*.gz; do gzip -t "$f" 2>/dev/null || fail "gzip: incomplete $f"; done
[ "$(gzip -dc o1/active.flow-ReceivedBitRate.csv.gz)" == "$before" ] &&
  pass "gzip: the table of the earlier run is intact" || fail "gzip: the earlier table changed"

# A line of 3 MiB (not a result file): one line naming file and line, no memory blow-up.
{ echo "$good"; head -c $((3 << 20)) /dev/zero | tr '\0' x; echo; } >longline.sca
expect_fail "a 3 MiB line" '^createsummary: error: longline.sca:3: a line longer than 1 MiB' \
  run '--resultsdirectory=o1\n--values=a\n--input=longline.sca\n' Run

finish
