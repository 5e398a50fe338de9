#!/usr/bin/env bash
# combinesummaries: header handling, values prefix, line numbers, bad inputs.
source "$(dirname "$0")/lib.sh"
BIN=$1
DATA=$2
CB="$BIN/combinesummaries"
setup_tmp
cp -r "$DATA/combine" "$TMP/c"
cd "$TMP/c" || exit 1
bzip2 b.vec

"$CB" out.data.bz2 -q <commands || fail "plain run: exit code $?"
check_table out.data.bz2 expected.data
"$CB" numbered.data --line-numbers --quiet <commands || fail "-l run: exit code $?"
check_table numbered.data expected-numbered.data
"$CB" -l -q numbered2.data.BZ2 <commands && bzip2 -t numbered2.data.BZ2 &&
  pass ".BZ2 output is compressed" || fail ".BZ2 output"
# Variable names on the command line, inputs relative to --simulationsdirectory.
mkdir sub && cp a.vec sub/
printf -- '--simulationsdirectory=sub\n--values=x 1\n--input=a.vec\n' |
  "$CB" -q dir.data "NodeName IsActive" && [ "$(sed -n 2p dir.data)" == "$(printf 'x 1\t000001\t100\t0.5\t0\t"Flow 0"')" ] &&
  pass "--simulationsdirectory and positional names" || fail "--simulationsdirectory: $(cat dir.data)"

# A large input goes through the parallel compressor in several pieces.
{ echo "A B"; seq 1 300000 | sed 's/.*/& text-&/'; } | bzip2 >large.bz2
printf -- '--values=v\n--input=large.bz2\n--values=w\n--input=large.bz2\n' | "$CB" -q large-out.bz2 Var ||
  fail "large run: exit code $?"
[ "$(bzip2 -dc large-out.bz2 | wc -l)" -eq 600001 ] &&
  [ "$(bzip2 -dc large-out.bz2 | sed -n 300002p)" == "$(printf 'w\t1 text-1')" ] &&
  pass "large input, multi-stream output" || fail "large output wrong"

# Its own gzip output (one member of many deflate pieces) is an input again.
printf -- '--values=v\n--input=large.bz2\n--values=w\n--input=large.bz2\n' | "$CB" -q large-out.gz Var ||
  fail "large gzip run: exit code $?"
printf -- '--values=again\n--input=large-out.gz\n' | "$CB" -q again.data Round ||
  fail "a .gz output as input: exit code $?"
[ "$(wc -l <again.data)" -eq 600001 ] && [ "$(sed -n 2p again.data)" == "$(printf 'again\tv\t1 text-1')" ] &&
  [ "$(sed -n 600001p again.data)" == "$(printf 'again\tw\t300000 text-300000')" ] &&
  pass "combinesummaries reads its own gzip output" || fail "gzip output as input: $(sed -n 1,2p again.data)"

# Memory stays bounded by blocks, not by the input: 2 x ~110 MB of input, RSS well below.
{ echo "A B"; seq 1 2000000 | sed 's/.*/& some-text-to-make-the-line-longer-&/'; } >huge.txt
printf -- '--values=v\n--input=huge.txt\n--values=w\n--input=huge.txt\n' >huge.commands
rss=$(python3 -c '
import os, resource, subprocess, sys
with open("huge.commands") as f:
    subprocess.run([sys.argv[1], "-q", "-c", "1", "huge-out.bz2", "Var"], stdin=f, check=True)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024)' "$CB")
if [ -n "$rss" ] && [ "$rss" -lt 80 ]; then
  pass "combining 2 x $(($(stat -c %s huge.txt) / 1000000)) MB took $rss MB of memory"
else
  fail "combining 2 x huge.txt: peak RSS ${rss:-?} MB"
fi
[ "$(bzip2 -dc huge-out.bz2 | wc -l)" -eq 4000001 ] || fail "huge output has the wrong number of lines"
rm -f huge.txt huge-out.bz2

# SIGINT: exit 130, no output, no temporary file.
printf -- '--values=v\n--input=large.bz2\n%.0s' 1 2 3 4 5 6 >six.commands
"$CB" -q -j 1 interrupted.bz2 Var <six.commands 2>int.txt &
pid=$!
# Writing has begun once the output is open (an unnamed O_TMPFILE file, or a named temporary).
# open_deleted PID: PID has a file open whose name is gone (how /proc shows an O_TMPFILE file).
open_deleted() {
  local fd
  for fd in /proc/"$1"/fd/*; do
    [[ $(readlink "$fd" 2>/dev/null) == *'(deleted)'* ]] && return 0
  done
  return 1
}
for _ in $(seq 1 100); do
  { open_deleted "$pid" || compgen -G "interrupted.bz2.tmp-*" >/dev/null; } && break
  sleep 0.05
done
kill -INT $pid
wait $pid
rc=$?
[ $rc -eq 130 ] && grep -q interrupted int.txt && pass "SIGINT: exit code 130" ||
  fail "SIGINT: exit code $rc ($(cat int.txt))"
compgen -G "interrupted.bz2*" >/dev/null && fail "SIGINT left $(ls interrupted.bz2*)"

# ------ bad input ----------------------------------------------------------------------------
printf 'Other\tHeader\n1\t2\n' >other.vec
: >empty.vec
printf 'AbsTime\n1\n' | bzip2 | head -c 20 >trunc.bz2
try() { printf '%b' "$1" | "$CB" -q result.data "NodeName IsActive"; }
expect_fail "different header" 'other.vec:1: header "Other	Header" differs from the header of a.vec' \
  try '--values=a 1\n--input=a.vec\n--values=b 2\n--input=other.vec\n'
expect_fail "missing input" "cannot open missing.vec" try '--values=a 1\n--input=missing.vec\n'
expect_fail "empty input" "empty.vec: empty file" try '--values=a 1\n--input=empty.vec\n'
expect_fail "truncated input" "trunc.bz2: truncated bzip2 data" try '--values=a 1\n--input=trunc.bz2\n'
printf 'AbsTime\n1\n' | gzip | head -c 15 >trunc.gz
expect_fail "truncated gzip input" "trunc.gz: truncated gzip data" try '--values=a 1\n--input=trunc.gz\n'
{ echo "A B"; head -c 100000 /dev/urandom; } >binary.vec
expect_fail "binary input" 'binary.vec:[0-9]+: (binary data \(a NUL byte\), not a table|not UTF-8 text at column [0-9]+ .*: a garbled file\?)' try '--values=a 1\n--input=binary.vec\n'
{ echo "A B"; head -c $((3 << 20)) /dev/zero | tr '\0' x; } >longline.vec
expect_fail "a 3 MiB line" 'longline.vec:2: a line longer than 1 MiB, not a table' try '--values=a 1\n--input=longline.vec\n'
expect_fail "wrong number of values" '<stdin>:1: --values=a has 1 fields, but there are 2' \
  try '--values=a\n--input=a.vec\n'
expect_fail "input without values" '<stdin>:1: --input=a.vec without a preceding --values=' \
  try '--input=a.vec\n'
expect_fail "invalid command" '<stdin>:1: invalid command "--skip=x"' try '--skip=x\n'
expect_fail "unbalanced quotes" 'unbalanced quotes in --values' try '--values=a "b\n'
[ -e result.data ] && fail "an output was left behind by a failed run" || pass "failed runs leave no output"
compgen -G "*.tmp-*" >/dev/null && fail "temporary files left: $(ls)"
expect_fail "no output file" "no output file given" "$CB"
expect_fail "-c 0" 'invalid compression level "0"' "$CB" x -c 0
"$CB" --help | grep -q -- "--line-numbers" && pass "--help" || fail "--help"

# Full disk: the uncompressed output of large.bz2 does not fit into 64 kB.
mkdir full
if mount -t tmpfs -o size=64k tmpfs full 2>/dev/null; then
  MOUNTS+=("$TMP/c/full")
  expect_fail "full disk" "cannot write full/out.data: No space left on device" \
    bash -c "printf -- '--values=v\n--input=large.bz2\n' | '$CB' -q full/out.data Var"
  [ -z "$(ls full)" ] && pass "nothing left on the full disk" || fail "left on full disk: $(ls full)"
else
  echo "SKIP: cannot mount a tmpfs (not root?)" >&2
  exit 77
fi
finish
