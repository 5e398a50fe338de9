#!/usr/bin/env bash
# getabstime and runtimeestimator, including the 8-byte big-endian start file.
source "$(dirname "$0")/lib.sh"
BIN=$1
setup_tmp
cd "$TMP" || exit 1

before=$(date +%s%6N)
t=$("$BIN/getabstime")
after=$(date +%s%6N)
[[ "$t" =~ ^[0-9]{16}$ ]] && [ "$t" -ge "$before" ] && [ "$t" -le "$after" ] &&
  pass "getabstime prints microseconds ($t)" || fail "getabstime: $t not in [$before, $after]"
expect_fail "getabstime with an argument" "unexpected argument" "$BIN/getabstime" x

RE="$BIN/runtimeestimator"
before=$(date +%s%6N)
out=$("$RE" start 10 0)
after=$(date +%s%6N)
[ "$out" == "##### ESTIMATION: - [0 of 10 - 0.00%]" ] && pass "run 0 line" || fail "run 0: $out"
[ "$(stat -c %s start)" -eq 8 ] || fail "start file is not 8 bytes"
stored=$(od -An -tu1 -v start | awk '{for (i = 1; i <= NF; i++) v = v * 256 + $i} END {printf "%.0f", v}')
[ "$stored" -ge "$before" ] && [ "$stored" -le "$after" ] &&
  pass "start file holds the time big-endian" || fail "start file: $stored not in [$before, $after]"

# A start time 60 s ago, written big-endian by hand: 1 of 3 runs took a minute => 2 minutes left.
write_be() { # write_be <value> <file>
  local v=$1 bytes="" i
  for i in 7 6 5 4 3 2 1 0; do bytes+=$(printf '\\x%02x' $(((v >> (8 * i)) & 255))); done
  printf '%b' "$bytes" >"$2"
}
write_le() {
  local v=$1 bytes="" i
  for i in 0 1 2 3 4 5 6 7; do bytes+=$(printf '\\x%02x' $(((v >> (8 * i)) & 255))); done
  printf '%b' "$bytes" >"$2"
}
ago=$(($(date +%s%6N) - 60000000))
write_be "$ago" be
out=$("$RE" be 3 1)
[[ "$out" =~ ^"##### ESTIMATION: "[0-9]{2}-[A-Z][a-z]{2}-[0-9]{4}" "[0-9:]{8}\.[0-9]{4}" (in 2.0"[0-9]" minutes)  [1 of 3 - 33.33%]"$ ]] &&
  pass "estimate from a big-endian start file: $out" || fail "estimate: $out"
write_le "$ago" le
out=$("$RE" le 3 1)
[[ "$out" == *"(in 2.0"?" minutes)  [1 of 3 - 33.33%]" ]] &&
  pass "old little-endian start file still understood" || fail "LE estimate: $out"
out=$("$RE" be 3 3)
[[ "$out" == *"(in 0.00 minutes)  [3 of 3 - 100.00%]" ]] && pass "last run" || fail "last run: $out"

expect_fail "current > total" "current run 4 is larger than total runs 3" "$RE" be 3 4
expect_fail "bad number" 'invalid total runs "x"' "$RE" be x 1
expect_fail "zero total" 'invalid total runs "0"' "$RE" be 0 0
expect_fail "missing start file" "cannot open missing" "$RE" missing 3 1
printf 'abc' >short
expect_fail "short start file" "expected 8 bytes" "$RE" short 3 1
expect_fail "too few arguments" "Usage: runtimeestimator" "$RE" be 3
mkdir ro && mount -t tmpfs -o ro,size=16k tmpfs ro 2>/dev/null && MOUNTS+=("$TMP/ro")
if [ "${#MOUNTS[@]}" -gt 0 ]; then
  expect_fail "unwritable start file" "cannot create ro/start" "$RE" ro/start 3 0
fi
finish
