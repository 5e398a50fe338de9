#!/usr/bin/env bash
# createsummary --long: every scalar of the inputs as a row of one CSV (scalars.csv.bz2, .gz or
# plain) beside the same tables as without it. Inputs: the four scalar files of a real
# netperfmeter-lab run (data/lab-run, from cmt-dissimilar-mptcp: an MPTCP flow with per-path
# scalars in f0, a TCP flow in f1, "nan" values), read as bzip2, gzip and plain files. Every row
# is compared with the scalar files as Python's shlex reads them. A truncated or malformed input
# is one line on stderr, exit 1, and nothing written (an earlier complete file stays as it was).
source "$(dirname "$0")/lib.sh"
# names DIR: the names in DIR, one per line ("ls DIR" without ls); names -A DIR: hidden ones too.
names() {
  (shopt -s nullglob; if [ "$1" == -A ]; then shopt -s dotglob; shift; fi; cd "$1" && printf '%s\n' *)
}
BIN=$1
DATA=$2
CS="$BIN/createsummary"
require python3
setup_tmp
cp -r "$DATA/lab-run" "$TMP/run"
cd "$TMP/run" || exit 1
# The three compressions: f0 as the lab wrote it (bzip2), f1's active gzip, its passive plain.
bzip2 -dc f1/run-active.sca.bz2 | gzip -9 >f1/run-active.sca.gz && rm f1/run-active.sca.bz2
bzip2 -d f1/run-passive.sca.bz2
commands() { # commands <results directory> [file replacing f1/run-passive.sca]
  printf -- '--varnames=rho cc Pair\n--resultsdirectory=%s\n' "$1"
  printf -- '--values=0.8 npm_lia 0\n--input=f0/run-active.sca.bz2\n'
  printf -- '--values=0.8 npm_lia 0\n--input=f0/run-passive.sca.bz2\n'
  printf -- '--values=0.8 "npm lia" 1\n--input=f1/run-active.sca.gz\n'
  printf -- '--values=0.8 "npm lia" 1\n--input=%s\n' "${2:-f1/run-passive.sca}"
}
total=$(cat f0/run-active.sca.bz2 f0/run-passive.sca.bz2 | bzip2 -dc | grep -c '^scalar')
total=$((total + $(gzip -dc f1/run-active.sca.gz | grep -c '^scalar') + $(grep -c '^scalar' f1/run-passive.sca)))
[ "$total" -eq 326 ] || fail "the test data has $total scalars, not 326"

# ------ Beside the tables -------------------------------------------------------------------
commands tables | "$CS" -b -q >tables.out || fail "createsummary without --long: exit code $?"
commands out | "$CS" -b -q --long >out.out || fail "createsummary --long: exit code $?"
tables=$(ls tables | wc -l)
if [ -e out/scalars.csv.bz2 ] && [ "$(names out | grep -v '^scalars\.csv\.bz2$')" == "$(names tables)" ] &&
   diff -r -x scalars.csv.bz2 tables out >/dev/null; then
  pass "--long adds out/scalars.csv.bz2 beside the same $tables tables"
else
  fail "--long: out/ has $(ls out | tr '\n' ' '); tables/ has $(ls tables | tr '\n' ' ')"
fi
lines=$(sed -n 's/^Wrote \([0-9]*\) lines into.*/\1/p' tables.out)
grep -q "^Wrote $((lines + total)) lines into $((tables + 1)) files" out.out &&
  pass "the summary line counts the long form: $(cat out.out)" || fail "summary line: $(cat out.out)"

# ------ Every scalar, a row each, in input order --------------------------------------------
bzip2 -dc out/scalars.csv.bz2 >long.csv || fail "scalars.csv.bz2 is not valid bzip2"
python3 - "$total" <<'EOF' && pass "every row matches its scalar (shlex), side/flow/path from the object" ||
import bz2, csv, gzip, math, re, shlex, sys
expected = []
inputs = [("f0/run-active.sca.bz2", ["0.8", "npm_lia", "0"]), ("f0/run-passive.sca.bz2", ["0.8", "npm_lia", "0"]),
          ("f1/run-active.sca.gz", ["0.8", "npm lia", "1"]), ("f1/run-passive.sca", ["0.8", "npm lia", "1"])]
for name, values in inputs:
    opener = bz2.open if name.endswith(".bz2") else gzip.open if name.endswith(".gz") else open
    with opener(name, "rt") as f:
        for line in f:
            words = shlex.split(line)
            if not words:
                continue
            assert words[0] == "scalar", line
            obj, stat, value = words[1], words[2], float(words[3])
            parts = obj.split(".")
            side = parts[1] if parts[1] in ("active", "passive") else ""
            flow = re.fullmatch(r"flow\[([0-9]+)\]", parts[2]) if side and len(parts) > 2 else None
            path = re.fullmatch(r"path\[([0-9]+)\]", parts[3]) if flow and len(parts) > 3 else None
            expected.append(values + [name, "0", side, flow.group(1) if flow else "", path.group(1) if path else "",
                                      obj, stat, value])
with open("long.csv", newline="") as f:
    records = list(csv.reader(f))
header = ["rho", "cc", "Pair", "file", "RunNo", "side", "flow", "path", "object", "name", "value"]
assert records[0] == header, records[0]
rows = records[1:]
assert len(rows) == len(expected) == int(sys.argv[1]), (len(rows), len(expected))
for got, want in zip(rows, expected):
    assert got[:-1] == want[:-1], (got, want)
    if math.isnan(want[-1]):
        assert got[-1] == "", (got, "nan is an empty field")
    else:
        assert float(got[-1]) == want[-1], (got, want)
assert sum(1 for r in rows if r[7]) >= 16 and sum(1 for r in rows if r[-1] == "") >= 1
assert {r[5] for r in rows} == {"active", "passive"} and {r[6] for r in rows} == {"0", "1", ""}
text = open("long.csv").read()
assert ',"npm lia",1,"f1/run-active.sca.gz",0,"active",1,,"netPerfMeter.active.flow[1]","Received Bytes",0\n' in text
assert '0.8,"npm_lia",0,"f0/run-active.sca.bz2",0,"active",0,1,"netPerfMeter.active.flow[0].path[1]",' in text
EOF
  fail "the long form does not match the scalar files"

# ------ Compression and separator -----------------------------------------------------------
commands out | "$CS" -b -q --long --compression=gzip >/dev/null || fail "--compression=gzip: exit code $?"
if [ -e out/scalars.csv.gz ] && [ ! -e out/scalars.csv.bz2 ] && gzip -t out/scalars.csv.gz &&
   cmp -s <(gzip -dc out/scalars.csv.gz) long.csv; then
  pass "--compression=gzip: scalars.csv.gz, the same content, the .bz2 variant removed"
else
  fail "--compression=gzip: $(names out | grep scalars)"
fi
commands out | "$CS" -b -q --long -c 0 >/dev/null || fail "-c 0: exit code $?"
[ -e out/scalars.csv ] && [ ! -e out/scalars.csv.gz ] && cmp -s out/scalars.csv long.csv &&
  pass "-c 0: plain scalars.csv" || fail "-c 0: $(names out | grep scalars)"
commands semicolon | "$CS" -b -q --long -s ';' -c 0 >/dev/null || fail "-s ';': exit code $?"
[ "$(head -1 semicolon/scalars.csv)" == '"rho";"cc";"Pair";"file";"RunNo";"side";"flow";"path";"object";"name";"value"' ] &&
  pass "-s ';' separates the long form too" || fail "-s ';': $(head -1 semicolon/scalars.csv)"

# ------ Malformed input: one line, exit 1, nothing written ----------------------------------
# one_line_error <what> <pattern> <results directory> <file replacing f1/run-passive.sca>
one_line_error() {
  local what=$1 pattern=$2 dir=$3 err rc
  err=$(commands "$dir" "$4" | "$CS" -b -q --long 2>&1 >/dev/null)
  rc=$?
  if [ $rc -eq 1 ] && [ "$(wc -l <<<"$err")" -eq 1 ] && grep -qE -- "$pattern" <<<"$err"; then
    pass "$what -> $err"
  else
    fail "$what: exit code $rc, stderr: $err"
  fi
}
head -c 400 f0/run-active.sca.bz2 >truncated.sca.bz2
gzip -dc f1/run-active.sca.gz | gzip -1 | head -c 300 >truncated.sca.gz
sed '5s/[0-9.]*$/12abc/' f1/run-passive.sca >badvalue.sca
sed '7s/Frames"/Frames/' f1/run-passive.sca >badquote.sca
one_line_error "truncated bzip2" '^createsummary: error: .*truncated\.sca\.bz2: (truncated|corrupt) bzip2 data' bad \
  truncated.sca.bz2
one_line_error "truncated gzip" '^createsummary: error: .*truncated\.sca\.gz: (truncated|corrupt) gzip data' bad \
  truncated.sca.gz
one_line_error "non-numeric value" '^createsummary: error: badvalue\.sca:5: numeric value expected, got "12abc"' bad \
  badvalue.sca
one_line_error "unterminated quote" '^createsummary: error: badquote\.sca:7: statistic name expected' bad \
  badquote.sca
[ -e bad ] && fail "results directory bad/ was created: $(ls bad)" || pass "nothing written for bad inputs"
cp out/scalars.csv before.csv
one_line_error "bad input, earlier results" 'badvalue\.sca:5: numeric value expected' out badvalue.sca
cmp -s out/scalars.csv before.csv && [ -z "$(names -A out | grep tmp)" ] &&
  pass "the earlier scalars.csv is intact, no temporary files" || fail "after a bad input: $(ls out)"

expect_fail "--long with a quote as separator" \
  '^createsummary: with --long, the separator must not contain a quote or a line break' "$CS" -b -q --long -s '"'
"$CS" --help | grep -q -- "--long" && pass "--help has --long" || fail "--help"
finish
