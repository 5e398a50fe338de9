#!/usr/bin/env bash
# exportvectors: NetPerfMeter vector files as one plain CSV table. The inputs are the real vector
# files of the shipped sample run (packaging/examples/results/run: measurement, per-flow and
# per-path vectors, bzip2) and a file in the writer's format with the text fields a reader trips
# over (a comma, a quote, a backslash, $, a backtick, blanks; the reference's older space
# separators; NA). Python's csv.DictReader must read every value into the column of its name,
# compared with the .vec files split independently (a shell's double-quote rule: the writer's quoting); DuckDB
# must read the plain and gzip tables with the right names and types and the same values (where
# the Python module duckdb is not installed, sqlite3 loads the table instead, and the test says
# so). Bad input: one line naming the file, exit 1, no output file.
source "$(dirname "$0")/lib.sh"
BIN=$1
EV="$BIN/exportvectors"
SAMPLE="$(cd "$(dirname "$0")/../.." && pwd)/packaging/examples/results/run"
require python3
setup_tmp
cp "$SAMPLE"/*.vec.bz2 "$TMP/"
cd "$TMP" || exit 1

# The writer's format (src/measure/results.cc: TAB-separated, descriptions shell-quoted), with
# a row in the reference's pre-2.0 spacing, and per-path NA values.
{
  printf 'AbsTime\tRelTime\tInterval\tFlowID\tDescription\tJitter\tAction\tAbsBytes\tAbsPackets\tAbsFrames\tRelBytes\tRelPackets\tRelFrames\n'
  printf '000001\t1795829822199055\t0.000000\t0.000000\t0\t"a, \\"quoted\\" \\\\ $5 \\`x\\`"\t0.000\t"Sent"\t417\t1\t1\t417\t1\t1\n'
  printf '000002 1795829822199055  0.000000 0.000000 -1 "Total"\t0 "Received" 1612 1 1 1612 1 1\n'
  printf '000003\t1795829823199055\t1.000000\t1.000000\t7\t"Ünïcode NA"\t1.250\t"Lost"\t0\t0\t0\t0\t0\t0\n'
} >tricky.vec

python3 - <<'EOF' >expected.json || fail "python: reading the .vec files"
import bz2, glob, json, re
# A field: blanks end it outside double quotes; inside them \ escapes \ " $ and ` (a shell's rule)
FIELD = re.compile(r'(?:[^\s"]+|"(?:[^"\\]|\\.)*")+')
QUOTED = re.compile(r'"((?:[^"\\]|\\.)*)"')
def fields(line):
    return [QUOTED.sub(lambda m: re.sub(r'\\([\\"$`])', r'\1', m.group(1)), f) for f in FIELD.findall(line)]
out = {}
for name in sorted(glob.glob("*.vec.bz2")) + ["tricky.vec"]:
    opener = bz2.open if name.endswith(".bz2") else open
    with opener(name, "rt", encoding="utf-8") as f:
        header = f.readline().split()
        rows = [fields(line) for line in f if line.strip()]
    assert all(len(r) == len(header) + 1 for r in rows), name
    out[name] = {"header": header, "rows": rows}
print(json.dumps(out))
EOF

# ------ Writing -------------------------------------------------------------------------------
for f in *.vec.bz2 tricky.vec; do
  "$EV" "$f" >"${f%%.vec*}.csv" || fail "$f: exit code $?"
done
"$EV" -q -o flows.csv.gz run-active-0000000[0-2]-0000.vec.bz2 || fail "three flows into flows.csv.gz: exit $?"
"$EV" -q -o paths.csv run-paths-*.vec.bz2 || fail "the per-path vectors into paths.csv: exit $?"
"$EV" -q -f -s tab --na=NA -o tricky.tsv tricky.vec || fail "-f -s tab --na=NA: exit $?"
out=$("$EV" -o banner.csv run-active.vec.bz2)
grep -q '^ExportVectors ' <<<"$out" && grep -q '^Wrote 73 lines' <<<"$out" && pass "-o: banner and Wrote line" ||
  fail "-o banner: $out"
[ "$(head -c 1 run-active.csv)" == '"' ] && pass "standard output holds the table only" ||
  fail "standard output: $(head -2 run-active.csv)"

# ------ Python: csv.DictReader ---------------------------------------------------------------
python3 - <<'EOF' && pass "csv.DictReader: every value in the column of its name, as in the .vec files" ||
import csv, glob, gzip, io, json
expected = json.load(open("expected.json"))
def same(got, want):
    if want == "NA":
        return got == ""
    try:
        return float(got) == float(want)
    except ValueError:
        return got == want
def check(f, names, file_column):
    reader = csv.DictReader(f)
    rows = list(reader)
    header = expected[names[0]]["header"]
    assert reader.fieldnames == (["File"] if file_column else []) + ["LineNo"] + header, reader.fieldnames
    want = [(n, r) for n in names for r in expected[n]["rows"]]
    assert len(rows) == len(want), (names, len(rows), len(want))
    for got, (name, r) in zip(rows, want):
        assert None not in got, got  # no field without a name
        if file_column:
            assert got["File"] == name, (got["File"], name)
        assert got["LineNo"] == str(int(r[0])), (got, r)
        for column, value in zip(header, r[1:]):
            assert same(got[column], value), (name, r[0], column, got[column], value)
for name in expected:
    with open(name.split(".vec")[0] + ".csv", newline="", encoding="utf-8") as f:
        check(f, [name], False)
with io.TextIOWrapper(gzip.open("flows.csv.gz"), newline="", encoding="utf-8") as f:
    check(f, sorted(n for n in expected if n.startswith("run-active-0")), True)
with open("paths.csv", newline="") as f:
    check(f, sorted(n for n in expected if n.startswith("run-paths-")), True)
t = list(csv.DictReader(open("tricky.csv", newline="", encoding="utf-8")))
assert [r["Description"] for r in t] == ['a, "quoted" \\ $5 `x`', "Total", "Ünïcode NA"], t
assert [r["FlowID"] for r in t] == ["0", "-1", "7"] and t[2]["Jitter"] == "1.250", t
paths = list(csv.DictReader(open("run-paths-active-00000000-0000.csv", newline="")))
assert paths[0]["Ssthresh"] == "" and paths[0]["State"] == "ESTABLISHED", paths[0]
tsv = list(csv.DictReader(open("tricky.tsv", newline="", encoding="utf-8"), delimiter="\t"))
assert tsv[0]["File"] == "tricky.vec" and tsv[0]["Description"] == t[0]["Description"], tsv[0]
EOF
  fail "Python's csv module does not read the tables as the .vec files say"
# --na=NA keeps R's spelling, bare; a quoted "NA" text stays text.
"$EV" --na=NA run-paths-active-00000000-0000.vec.bz2 | sed -n 2p | grep -q ',NA,' &&
  pass "--na=NA writes NA bare" || fail "--na=NA"

# ------ DuckDB (or sqlite3) -------------------------------------------------------------------
if python3 -c "import duckdb" 2>/dev/null; then
  python3 - <<'EOF' && pass "DuckDB reads the plain and gzip tables: names, types, values" ||
import duckdb, json
expected = json.load(open("expected.json"))
db = duckdb.connect()
flow = expected["run-active-00000000-0000.vec.bz2"]
described = db.execute("DESCRIBE SELECT * FROM read_csv('run-active-00000000-0000.csv')").fetchall()
assert [d[0] for d in described] == ["LineNo"] + flow["header"], described
types = {d[0]: d[1] for d in described}
assert types["AbsTime"] == "BIGINT" and types["Delay"] == "DOUBLE", types
got = db.execute("SELECT COUNT(*), SUM(RelBytes), MAX(SeqNumber), SUM(Delay) FROM read_csv('run-active-00000000-0000.csv')").fetchone()
rows = flow["rows"]
want = (len(rows), sum(int(r[7]) for r in rows), max(int(r[3]) for r in rows), sum(float(r[10]) for r in rows))
assert got[:3] == want[:3] and abs(got[3] - want[3]) < 1e-6 * max(1, abs(want[3])), (got, want)
flows = db.execute("SELECT File, COUNT(*) FROM read_csv('flows.csv.gz') GROUP BY File ORDER BY File").fetchall()
assert flows == [(n, len(expected[n]["rows"])) for n in sorted(expected)
                 if n.startswith("run-active-0") and expected[n]["rows"]], flows  # (flow 2 received nothing)
paths = db.execute("SELECT Ssthresh, State, Cwnd FROM read_csv('paths.csv') "
               "WHERE File = 'run-paths-active-00000000-0000.vec.bz2' ORDER BY LineNo LIMIT 1").fetchone()
first = expected["run-paths-active-00000000-0000.vec.bz2"]["rows"][0]
assert paths == (None, "ESTABLISHED", int(first[7])), (paths, first)
tricky = db.execute("SELECT Description FROM read_csv('tricky.csv') ORDER BY LineNo").fetchall()
assert [t[0] for t in tricky] == ['a, "quoted" \\ $5 `x`', "Total", "Ünïcode NA"], tricky
measurement = db.execute("SELECT SUM(RelBytes) FROM read_csv('run-active.csv') WHERE Action = 'Received' AND FlowID = -1").fetchone()[0]
assert measurement == sum(int(r[11]) for r in expected["run-active.vec.bz2"]["rows"] if r[7] == "Received" and r[4] == "-1")
EOF
    fail "DuckDB does not read the tables as the .vec files say"
else
  echo "NOTE: the Python module duckdb is not installed (python3 -m pip install duckdb): the tables are checked with sqlite3 instead"
  python3 - <<'EOF' && pass "sqlite3 (csv module import) sums the tables as the .vec files say" ||
import csv, json, sqlite3
expected = json.load(open("expected.json"))
db = sqlite3.connect(":memory:")
reader = csv.reader(open("run-active-00000000-0000.csv", newline=""))
header = next(reader)
db.execute("CREATE TABLE flow (%s)" % ", ".join('"%s"' % h for h in header))
db.executemany("INSERT INTO flow VALUES (%s)" % ", ".join("?" * len(header)), reader)
rows = expected["run-active-00000000-0000.vec.bz2"]["rows"]
got = db.execute("SELECT COUNT(*), SUM(CAST(RelBytes AS INTEGER)), MAX(CAST(SeqNumber AS INTEGER)) FROM flow").fetchone()
assert got == (len(rows), sum(int(r[7]) for r in rows), max(int(r[3]) for r in rows)), got
EOF
    fail "sqlite3 does not read the table as the .vec file says"
fi

# ------ Bad input: one line naming the file, exit 1, no output file -----------------------------
bzip2 -c tricky.vec >t.vec.bz2
head -c $(($(stat -c %s run-active-00000000-0000.vec.bz2) / 2)) run-active-00000000-0000.vec.bz2 >trunc.vec.bz2
{ head -c 20 t.vec.bz2; printf 'garbage garbage garbage'; tail -c +44 t.vec.bz2; } >corrupt.vec.bz2
printf 'version 2\nvector 0 net.sink throughput TV\n0\t1\t2\n' >omnet.vec
{ head -2 tricky.vec; printf '000003\t1\t2\n'; } >short.vec
{ head -1 tricky.vec; printf '0000x1\t1\t2\t3\t4\t"d"\t5\t"Sent"\t1\t1\t1\t1\t1\t1\n'; } >badnumber.vec
{ head -1 tricky.vec; printf '000001\t1\t2\t3\t4\t"open\t5\t"Sent"\t1\t1\t1\t1\t1\t1\n'; } >quote.vec
: >empty.vec
expect_fail "truncated .vec.bz2" 'trunc.vec.bz2: truncated bzip2 data' "$EV" -o o.csv trunc.vec.bz2
expect_fail "corrupt .vec.bz2" 'corrupt.vec.bz2: ' "$EV" -o o.csv corrupt.vec.bz2
expect_fail "OMNeT++ file" 'omnet.vec:1: an OMNeT\+\+ vector file \("version" line\), not a NetPerfMeter one' \
  "$EV" -o o.csv omnet.vec
expect_fail "short row" 'short.vec:3: 3 fields, expected 14 \(the line number and the header'"'"'s 13\)' \
  "$EV" -o o.csv short.vec
expect_fail "bad line number" 'badnumber.vec:2: bad line number "0000x1"' "$EV" -o o.csv badnumber.vec
expect_fail "open quote" 'quote.vec:2: a quote that is not closed' "$EV" -o o.csv quote.vec
expect_fail "empty file" 'empty.vec: empty file' "$EV" -o o.csv empty.vec
expect_fail "missing file" 'cannot open missing.vec' "$EV" -o o.csv missing.vec
expect_fail "mixed kinds" 'run-active-00000000-0000.vec.bz2:1: its columns differ from those of run-active.vec.bz2' \
  "$EV" -o o.csv run-active.vec.bz2 run-active-00000000-0000.vec.bz2
expect_fail "no input" 'no input file given' "$EV" -o o.csv
expect_fail "bad separator" 'invalid separator ";" \(expected , or tab\)' "$EV" -s ';' tricky.vec
expect_fail "bad --na" '--na="a,b": a missing value' "$EV" --na=a,b tricky.vec
[ -e o.csv ] && fail "output left behind by a failed run" || pass "failed runs leave no output"
for f in trunc corrupt; do
  n=$("$EV" -o o.csv $f.vec.bz2 2>&1 >/dev/null | wc -l)
  [ "$n" -eq 1 ] && pass "$f.vec.bz2: one line" || fail "$f.vec.bz2: $n lines"
done
finish
