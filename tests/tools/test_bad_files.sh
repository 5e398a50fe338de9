#!/usr/bin/env bash
# Bad result files, as a study of many runs meets them (a run that lost its results, a file cut
# off by a full disk or a kill, a garbled or non-UTF-8 file), plain and bzip2: each tool that
# reads scalar or vector files ends with exit status 1 and exactly one line on standard error
# that names the file (and the line where there is one); createsummary -r skips such a file
# with a warning, and fails when it skipped every input.
source "$(dirname "$0")/lib.sh"
BIN=$1
setup_tmp
cd "$TMP" || exit 1

# one_line <what> <pattern> <command...>: exit 1 and exactly one line on stderr matching pattern
one_line() {
  local what=$1 pattern=$2 err rc
  shift 2
  err=$("$@" 2>&1 >/dev/null)
  rc=$?
  if [ $rc -ne 1 ]; then
    fail "$what: exit status $rc, expected 1 (stderr: $err)"
  elif [ "$(wc -l <<<"$err")" -ne 1 ]; then
    fail "$what: $(wc -l <<<"$err") lines on stderr, expected one: $err"
  elif ! grep -qE -- "$pattern" <<<"$err"; then
    fail "$what: stderr does not match /$pattern/: $err"
  else
    pass "$what -> $err"
  fi
}
printf 'AbsTime RelTime Value\n1 0 2\n' >np-good.vec
summarise() { printf -- '--varnames=Run\n--values=1\n--input=%s\n' "$1" | "$BIN/createsummary" -b -q; }
combine() { printf -- '--varnames=Run\n--values=1\n--input=%s\n' "$1" | "$BIN/combinesummaries" -q out.data.bz2; }

# --- scalar files (createsummary)
: >empty.sca.bz2
: >empty.sca
printf '' | bzip2 >nothing.sca.bz2  # a valid bzip2 stream of no bytes
printf 'version 2\nrun r1\nattr a b\n' >noscalars.sca
printf 'scalar "netPerfMeter.active" "Received Bytes" 1\n' >good.sca
one_line "0-byte .sca.bz2" '^createsummary: error: empty\.sca\.bz2: empty file, no scalars' summarise empty.sca.bz2
one_line "0-byte .sca" '^createsummary: error: empty\.sca: empty file' summarise empty.sca
one_line ".sca.bz2 of nothing" '^createsummary: error: nothing\.sca\.bz2: empty file' summarise nothing.sca.bz2
one_line ".sca without scalars" '^createsummary: error: noscalars\.sca: no scalars in its 3 lines' summarise noscalars.sca
one_line "no input at all" '^createsummary: error: standard input named no scalar file' \
  "$BIN/createsummary" -b -q </dev/null
err=$(printf -- '--varnames=Run\n--values=1\n--input=good.sca\n--values=2\n--input=empty.sca.bz2\n' |
      "$BIN/createsummary" -b -q -r 2>&1 >/dev/null)
rc=$?
[ $rc -eq 0 ] && grep -q '^createsummary: warning: empty\.sca\.bz2: empty file.* - skipping this input$' <<<"$err" &&
  grep -q 'skipped 1 of 2 input files' <<<"$err" && pass "-r skips the empty file with a warning naming it" ||
  fail "-r with an empty file: exit $rc, $err"
err=$(printf -- '--varnames=Run\n--values=1\n--input=empty.sca\n' | "$BIN/createsummary" -b -q -r 2>&1 >/dev/null)
rc=$?
[ $rc -eq 1 ] && grep -q '^createsummary: error: all 1 input files were skipped: no tables$' <<<"$err" &&
  pass "-r with every input skipped is an error" || fail "-r, all skipped: exit $rc, $err"
printf 'scalar "netPerfMeter.active" "Bytes" 1\nscalar "netPerfMeter.active" "Bytes \xff" 1\n' >nonutf8.sca
bzip2 -k nonutf8.sca
for z in "" .bz2; do
  one_line "non-UTF-8 scalar (sca$z)" "^createsummary: error: nonutf8\.sca$z:2: not UTF-8 text at column 37" \
    summarise nonutf8.sca$z
done

# commands on standard input: variable names and values go into every table
one_line "non-UTF-8 --values= (createsummary)" '^createsummary: error: <stdin>:2: not UTF-8 text at column 10' \
  sh -c "printf -- '--varnames=Run\\n--values=\\351t\\351\\n--input=good.sca\\n' | '$BIN/createsummary' -b -q"
one_line "non-UTF-8 --varnames= (combinesummaries)" '^combinesummaries: error: <stdin>:1: not UTF-8 text at column 12' \
  sh -c "printf -- '--varnames=\\377\\n--values=1\\n--input=np-good.vec\\n' | '$BIN/combinesummaries' -q out.data.bz2"

# --- OMNeT++ vector files (extractvectors)
printf 'version 2\nvector 0 net "x" ETV\n0 1 0.5 1.0\n' >good.vec
printf 'version 2\nvector 0 net "x" ETV\n0 1 0.5 1.0\n0 2 0.6 \xff\xfe\n' >nonutf8-value.vec
printf 'version 2\nvector 0 net "thr\xc3(" ETV\n0 1 0.5 1.0\n' >nonutf8-name.vec
printf 'version 2\nvector 0 net "x" ETV\n0 1 0.5 1.0\n0 2 0.' >cut.vec
printf 'version 2\nvector 0 net "x" ETV\n0\x00 1 0.5 1.0\n' >nul.vec
printf 'version 2\n' >novectors.vec
: >empty.vec
for f in nonutf8-value nonutf8-name cut; do bzip2 -k $f.vec; done
head -c 40 <(bzip2 -c good.vec) >cutstream.vec.bz2
: >empty.vec.bz2
ev() { "$BIN/extractvectors" -q "$1" out.data; }
for z in "" .bz2; do
  one_line "non-UTF-8 value (vec$z)" "^extractvectors: error: nonutf8-value\.vec$z:4: not UTF-8 text at column 9 .*\\\\xff\\\\xfe" \
    ev nonutf8-value.vec$z
  one_line "non-UTF-8 vector name (vec$z)" "^extractvectors: error: nonutf8-name\.vec$z:2: not UTF-8 text" ev nonutf8-name.vec$z
  one_line "line cut off (vec$z)" "^extractvectors: error: cut\.vec$z:4: too few columns" ev cut.vec$z
  one_line "empty (vec$z)" "^extractvectors: error: empty\.vec$z: empty file" ev empty.vec$z
done
one_line "bzip2 stream cut off" '^extractvectors: error: cannot read cutstream\.vec\.bz2: truncated bzip2 data' \
  ev cutstream.vec.bz2
one_line "NUL byte" '^extractvectors: error: nul\.vec:3: binary data' ev nul.vec
one_line "no vector declared" '^extractvectors: error: novectors\.vec: no vector declared' ev novectors.vec

# --- NetPerfMeter vector files and tables (combinesummaries, as plot-netperfmeter-results uses it)
printf 'AbsTime RelTime Value\n1 0 2\n2 1 \xe2\x82\n' >np-nonutf8.vec
printf 'AbsTime RelTime Value\n1 0 2\n2 1' >np-cut.vec
for f in np-nonutf8 np-cut; do bzip2 -k $f.vec; done
head -c 40 <(bzip2 -c np-good.vec) >np-cutstream.vec.bz2
for z in "" .bz2; do
  one_line "non-UTF-8 row (vec$z)" "^combinesummaries: error: np-nonutf8\.vec$z:3: not UTF-8 text at column 5" \
    combine np-nonutf8.vec$z
  one_line "last row cut off (vec$z)" "^combinesummaries: error: np-cut\.vec$z:3: the last line has no newline" \
    combine np-cut.vec$z
  one_line "empty (vec$z)" "^combinesummaries: error: empty\.vec$z: empty file" combine empty.vec$z
done
one_line "bzip2 stream cut off (combinesummaries)" \
  '^combinesummaries: error: cannot read np-cutstream\.vec\.bz2: truncated bzip2 data' combine np-cutstream.vec.bz2
combine np-good.vec && [ "$(bzip2 -dc out.data.bz2 | wc -l)" -eq 2 ] && pass "a good NetPerfMeter vector file" ||
  fail "combinesummaries np-good.vec"
finish
