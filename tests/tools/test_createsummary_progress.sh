#!/usr/bin/env bash
# Progress on stderr: rewritten in place on a terminal (files, then tables, with rates),
# nothing with -q, nothing for a short run on a pipe.
source "$(dirname "$0")/lib.sh"
BIN=$1
BENCH=$2
setup_tmp
cd "$TMP" || exit 1
python3 "$BENCH/gen_parameter_study.py" study --runs 150 || { fail "generator"; finish; }
cd study || exit 1
script -qec "'$BIN/createsummary' -b -j 1 <results.summary >/dev/null" tty.txt >/dev/null ||
  fail "createsummary under script: exit code $?"
if grep -qaE $'\r''createsummary: [0-9]+/108 tables, [0-9.]+ tables/s' tty.txt &&
   grep -qaE 'createsummary: 108/108 tables' tty.txt; then
  pass "progress on a terminal"
else
  fail "no progress on a terminal: $(cat -v tty.txt)"
fi
script -qec "'$BIN/createsummary' -b -q -j 1 <results.summary >/dev/null" quiet.txt >/dev/null
grep -qa "tables/s" quiet.txt && fail "progress despite -q" || pass "-q: no progress"
"$BIN/createsummary" -b <results.summary >/dev/null 2>err.txt
[ -s err.txt ] && fail "short run on a pipe printed: $(cat err.txt)" || pass "short run on a pipe: quiet stderr"
finish
