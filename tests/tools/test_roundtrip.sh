#!/usr/bin/env bash
# Round trip with the real netperfmeter: the worked parameter-study example
# (packaging/examples/run-experiment1: loopback, tcp/udp x 1000/1400 B x 3 repetitions),
# then checks the passive.flow-ReceivedBitRate table createsummary made of it. A failed
# netperfmeter run is repeated up to twice (reported as NOTE on stderr), as a real study does.
source "$(dirname "$0")/lib.sh"
BIN=$1
NPM=$2
EXAMPLES=$3
setup_tmp
cd "$TMP" || exit 1
# Run a private copy under another name, so that other concurrent tests that stop "their"
# netperfmeter processes by name cannot hit ours.
cp "$NPM" "$TMP/npm-under-test"
NPM="$TMP/npm-under-test"

# A free port pair (PORT, PORT+1) in 17000-17999.
PORT=""
for p in $(shuf -i 17400-17990 -n 40); do
  if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null &&
     ! (exec 3<>"/dev/tcp/127.0.0.1/$((p + 1))") 2>/dev/null &&
     ! (exec 3<>"/dev/tcp/127.0.0.1/$((p - 1))") 2>/dev/null; then
    PORT=$p
    break
  fi
done
[ -n "$PORT" ] || { echo "no free port found" >&2; exit 1; }

UDP_RATE=2000
if NAME=study PORT=$PORT RUNTIME=2 UDP_RATE=$UDP_RATE PROTOCOLS="tcp udp" FRAMESIZES="1000 1400" \
   REPETITIONS=3 RETRIES=2 RUN_TIMEOUT=20 NETPERFMETER=$NPM CREATESUMMARY=$BIN/createsummary GETABSTIME=$BIN/getabstime \
   RUNTIMEESTIMATOR=$BIN/runtimeestimator timeout 240 "$EXAMPLES/run-experiment1" >example.log 2>&1; then
  pass "example ran"
else
  fail "example failed:"
  cat example.log >&2
  for f in study/passive.log study/run-*/run.log; do [ -e "$f" ] && tail -5 "$f" >&2; done
  finish
fi

# Repeated runs are the core tool's business (its own tests), but say so loudly here.
if grep -q "failed (attempt" example.log; then
  echo "NOTE: netperfmeter runs had to be repeated:" >&2
  grep "failed (attempt" example.log >&2
  grep -h -E "ERROR|FATAL" study/run-*/run.log >&2 || true
fi

table=study/passive.flow-ReceivedBitRate.data.bz2
[ -e "$table" ] || { fail "no $table"; finish; }
bzip2 -dc "$table" >table.txt
header=$(head -1 table.txt)
expected_header=$(printf 'RunNo\tValueNo\tSplit\tpassive.flow\tTimestamp Destination Protocol FrameSize Repetition Directory\tpassive.flow-ReceivedBitRate')
[ "$header" == "$expected_header" ] && pass "header" || fail "header: $header"
rows=$(($(wc -l <table.txt) - 1))
[ "$rows" -eq 12 ] && pass "12 rows (2 protocols x 2 sizes x 3 repetitions)" || fail "$rows rows"
# Every row: 11 whitespace-separated fields, flow 0, a sensible bit rate.
awk -v rate="$UDP_RATE" 'NR > 1 {
    if (NF != 11) { print "bad field count: " $0; bad = 1; next }
    if ($4 != 0 || $6 != "127.0.0.1") { print "bad row: " $0; bad = 1 }
    if ($7 == "tcp" && $11 < 10e6) { print "TCP rate too low: " $0; bad = 1 }
    if ($7 == "udp") {
      expected = rate * $8 * 8
      if ($11 < 0.5 * expected || $11 > 1.5 * expected) { print "UDP rate not about " expected ": " $0; bad = 1 }
    }
    n[$7 " " $8]++
  } END {
    for (k in n) if (n[k] != 3) { print "combination " k " has " n[k] " rows"; bad = 1 }
    exit bad
  }' table.txt >check.txt && pass "rows have sensible values" || fail "$(cat check.txt)"
# The active side's table exists, too, with the same number of rows.
[ "$(bzip2 -dc study/active.flow-ReceivedBitRate.data.bz2 | wc -l)" -eq 13 ] &&
  pass "active.flow-ReceivedBitRate has 12 rows" || fail "active table"
finish
