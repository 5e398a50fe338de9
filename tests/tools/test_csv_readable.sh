#!/usr/bin/env bash
# createsummary --csv tables as other programs read them as they are (DuckDB reads plain and
# gzip CSV, not bzip2): plain (--compression=none) and gzip (--compression=gzip) tables are
# loaded with Python's csv module (and gzip module) and with R's data.table::fread, and every
# row is compared with the values in the scalar files. Also: -l gives the line numbers a
# header field, combinesummaries writes gzip by the output name, bad values are one-line
# errors.
source "$(dirname "$0")/lib.sh"
BIN=$1
DATA=$2
CS="$BIN/createsummary"
require python3
setup_tmp
cp -r "$DATA/netperfmeter" "$TMP/npm"
cd "$TMP/npm" || exit 1
bzip2 -k old/run-active.sca  # the commands read it compressed

# ------ Writing -----------------------------------------------------------------------------
for variant in "none --compression=none" "gzip --compression=gzip" "bz2 --compression=bzip2"; do
  set -- $variant
  sed "s/--resultsdirectory=out/--resultsdirectory=$1/" commands | "$CS" -b -q --csv "$2" >/dev/null ||
    fail "createsummary --csv $2: exit code $?"
done
[ "$(ls none)" == "$(cd bz2 && ls | sed 's/\.bz2$//')" ] && [ "$(ls none | wc -l)" -eq 4 ] &&
  pass "--compression=none: $(ls none | tr '\n' ' ')" || fail "none tables: $(ls none)"
[ "$(ls gzip)" == "$(cd none && ls | sed 's/$/.gz/')" ] && pass "--compression=gzip: <name>.csv.gz" ||
  fail "gzip tables: $(ls gzip)"
same=yes
for f in none/*.csv; do
  t=$(basename "$f")
  gzip -t "gzip/$t.gz" 2>/dev/null && cmp -s <(gzip -dc "gzip/$t.gz") "$f" &&
    cmp -s <(bzip2 -dc "bz2/$t.bz2") "$f" || { fail "$t: gzip/bzip2/plain contents differ"; same=no; }
done
[ $same == yes ] && pass "the three variants have the same content"
check_table none/active.flow-ReceivedBitRate.csv expected/active.flow-ReceivedBitRate.csv
# -c 0 means plain whatever --compression says; a new variant replaces the others.
sed "s/--resultsdirectory=out/--resultsdirectory=gzip/" commands | "$CS" -b -q --csv -c 0 \
  --compression=gzip >/dev/null || fail "-c 0 --compression=gzip: exit code $?"
[ "$(ls gzip)" == "$(ls none)" ] && pass "-c 0 wins; the .csv.gz variants were removed" ||
  fail "after -c 0: $(ls gzip)"
sed "s/--resultsdirectory=out/--resultsdirectory=gzip/" commands | "$CS" -b -q --csv -c 1 \
  --compression gzip >/dev/null || fail "-c 1 --compression gzip: exit code $?"
[ "$(ls gzip)" == "$(cd none && ls | sed 's/$/.gz/')" ] && pass "back to gzip (level 1)" ||
  fail "after --compression gzip: $(ls gzip)"
# The reference layout compresses the same way: <name>.data.gz.
sed "s/--resultsdirectory=out/--resultsdirectory=data/" commands | "$CS" -b -q --compression=gzip \
  >/dev/null || fail "--compression=gzip (reference layout): exit code $?"
cmp -s <(gzip -dc data/active.total-ReceivedBytes.data.gz) expected/active.total-ReceivedBytes.data &&
  pass "reference layout as .data.gz" || fail "data/active.total-ReceivedBytes.data.gz"
# Every output format of one tool is an input of the next: combinesummaries reads
# createsummary's tables plain, gzip- and bzip2-compressed, and gets the same table.
for t in data/active.total-ReceivedBytes.data.gz bz2/active.total-ReceivedBytes.csv.bz2 \
         gzip/active.total-ReceivedBytes.csv.gz none/active.total-ReceivedBytes.csv; do
  out=combined-$(basename "$t").data
  printf -- '--values=x\n--input=%s\n' "$t" | "$BIN/combinesummaries" -q "$out" Piped ||
    { fail "combinesummaries of $t: exit code $?"; continue; }
  case $t in
    *.gz) original=$(gzip -dc "$t") ;;
    *.bz2) original=$(bzip2 -dc "$t") ;;
    *) original=$(cat "$t") ;;
  esac
  [ "$(cut -f2- "$out")" == "$original" ] && [ "$(head -1 "$out" | cut -f1)" == "Piped" ] &&
    pass "createsummary's $(basename "$t") through combinesummaries" || fail "combinesummaries of $t: $(head -3 "$out")"
done
# Line numbers get a header field, so that every row has as many fields as the header.
sed "s/--resultsdirectory=out/--resultsdirectory=numbered/" commands | "$CS" -b -q --csv -l \
  --compression=none >/dev/null || fail "--csv -l: exit code $?"

# The expected rows, straight from the scalar files and the commands: "table|agg values|
# variable values|value" (value with six decimals).
python3 - >expected.rows <<'EOF' || fail "python: reading the scalar files"
import bz2, shlex
values, skip = None, []
for command in open("commands").read().splitlines():
    if command.startswith("--values="):
        values = shlex.split(command[len("--values="):])
    elif command.startswith("--skip="):
        skip.append(command[len("--skip="):])
    elif command.startswith("--input="):
        name = command[len("--input="):]
        opener = bz2.open if name.endswith(".bz2") else open
        with opener(name, "rt") as f:
            for line in f:
                words = shlex.split(line)
                if not words or words[0] != "scalar":
                    continue
                obj, stat, value = words[1], words[2], float(words[3])
                parts = obj.split(".")[1:]
                plain, aggs = [], []
                for p in parts:
                    if "[" in p:
                        p, index = p.rstrip("]").split("[")
                        aggs.append(index)
                    plain.append(p)
                table = ".".join(plain) + "-" + stat.replace(" ", "")
                if any(table.startswith(s) for s in skip):
                    continue
                print("|".join([table, " ".join(aggs), " ".join(values), "%.6f" % value]))
EOF
[ "$(wc -l <expected.rows)" -eq 16 ] && pass "16 expected rows from the scalar files" ||
  fail "expected rows: $(cat expected.rows)"

# ------ Python: csv module (and gzip module) ------------------------------------------------
python3 - <<'EOF' && pass "Python's csv module reads the plain, gzip and numbered tables" ||
import csv, glob, gzip, io, os, zlib
expected = sorted(open("expected.rows").read().splitlines())
def rows(directory, suffix):
    got = []
    for path in sorted(glob.glob(directory + "/*.csv" + suffix)):
        table = os.path.basename(path)[: -len(".csv" + suffix)]
        if suffix == ".gz":
            raw = open(path, "rb").read()
            d = zlib.decompressobj(31)
            d.decompress(raw)
            assert d.eof and not d.unused_data, path + ": not exactly one gzip member"
            f = io.TextIOWrapper(gzip.open(path), newline="")
        else:
            f = open(path, newline="")
        with f:
            records = list(csv.reader(f))
        header = records[0]
        numbered = header[0] == "LineNo"
        if numbered:
            header = header[1:]
        assert header[:3] == ["RunNo", "ValueNo", "Split"], header
        assert header[-1] == table, (header, table)
        aggs = [i for i, h in enumerate(header[3:-1], 3) if h not in ("Protocol", "Size")]
        for n, r in enumerate(records[1:], 1):
            assert len(r) == len(records[0]), (path, r)
            if numbered:
                assert int(r[0]) == n, (path, r)
                r = r[1:]
            assert (r[0], r[1], r[2]) == ("0", "1", ""), (path, r)
            got.append("|".join([table, " ".join(r[i] for i in aggs), " ".join(r[-3:-1]),
                                 "%.6f" % float(r[-1])]))
    return sorted(got)
for directory, suffix in (("none", ""), ("gzip", ".gz"), ("numbered", "")):
    got = rows(directory, suffix)
    assert got == expected, (directory, got, expected)
EOF
  fail "Python: the tables do not read back as expected"

# ------ R: data.table::fread (plain, and .gz through R.utils) -------------------------------
if ! command -v Rscript >/dev/null ||
   ! Rscript -e 'suppressMessages({library(data.table); library(R.utils)})' >/dev/null 2>&1; then
  echo "SKIP: Rscript with data.table and R.utils is not installed (r-cran-data.table, r-cran-r.utils)" >&2
  [ "$FAILURES" -eq 0 ] && exit 77
  finish
fi
out=$(Rscript --vanilla -e '
  suppressMessages(library(data.table))
  expected <- sort(readLines("expected.rows"))
  readAll <- function(dir, suffix) {
    got <- character()
    for (path in sort(Sys.glob(file.path(dir, paste0("*.csv", suffix))))) {
      table <- sub(paste0("\\.csv", gsub(".", "\\.", suffix, fixed = TRUE), "$"), "", basename(path))
      d <- fread(path, colClasses = list(character = c("Split", "Protocol", "Size")))
      n <- names(d)
      if (n[1] == "LineNo") {
        stopifnot(identical(d$LineNo, seq_len(nrow(d))))
        d <- d[, -1]
        n <- n[-1]
      }
      stopifnot(identical(n[1:3], c("RunNo", "ValueNo", "Split")), n[length(n)] == table,
                all(d$RunNo == 0), all(d$ValueNo == 1), all(d$Split == ""),
                is.numeric(d[[table]]))
      aggs <- setdiff(n[4:(length(n) - 1)], c("Protocol", "Size"))
      agg <- if (length(aggs)) do.call(paste, d[, aggs, with = FALSE]) else rep("", nrow(d))
      got <- c(got, paste(table, agg, paste(d$Protocol, d$Size), sprintf("%.6f", d[[table]]),
                          sep = "|"))
    }
    sort(got)
  }
  for (v in list(c("none", ""), c("gzip", ".gz"), c("numbered", ""))) {
    got <- readAll(v[1], v[2])
    if (!identical(got, expected)) {
      cat("MISMATCH in", v[1], "\n", got, sep = "\n")
      quit(status = 1)
    }
  }
  f <- fread("gzip/active.flow-ReceivedBitRate.csv.gz")
  stopifnot(nrow(f) == 8, ncol(f) == 7, f$Size[f$Protocol == "udp"][1] == "big frame",
            sum(f[["active.flow-ReceivedBitRate"]]) == 15201.5)
  cat("fread read all tables\n")' 2>&1)
if grep -q "fread read all tables" <<<"$out"; then
  pass "data.table::fread reads the plain, gzip and numbered tables"
else
  fail "R: $out"
fi

# ------ combinesummaries: gzip by the output name -------------------------------------------
printf -- '--values=a\n--input=none/active.total-ReceivedBytes.csv\n--values=b\n--input=none/active.total-ReceivedBytes.csv\n' >combine.commands
"$BIN/combinesummaries" -q all.csv.gz V <combine.commands && "$BIN/combinesummaries" -q all.csv V <combine.commands ||
  fail "combinesummaries: exit code $?"
python3 -c '
import gzip, sys, zlib
raw = open("all.csv.gz", "rb").read()
d = zlib.decompressobj(31)
d.decompress(raw)
sys.exit(0 if d.eof and not d.unused_data and gzip.decompress(raw) == open("all.csv", "rb").read() else 1)' &&
  pass "combinesummaries all.csv.gz: one gzip member, same content as all.csv" ||
  fail "combinesummaries all.csv.gz"

# ------ Errors: one line, exit 1, nothing written -------------------------------------------
mkdir bad
one_line() { # one_line <what> <expected stderr> <command...>
  local what=$1 expected=$2 err rc
  shift 2
  err=$(sed 's/--resultsdirectory=out/--resultsdirectory=bad/' commands | "$@" 2>&1 >/dev/null)
  rc=$?
  if [ $rc -eq 1 ] && [ "$err" == "$expected" ]; then
    pass "$what -> $err"
  else
    fail "$what: exit code $rc, stderr: $err"
  fi
}
one_line "--compression=zstd" 'createsummary: invalid compression "zstd" (expected bzip2, gzip or none)' \
  "$CS" -b -q --csv --compression=zstd
one_line "--compression without a value" 'createsummary: option --compression needs a value' \
  "$CS" -b -q --csv --compression
one_line "--csv -s with a quote" \
  'createsummary: with --csv, the separator must not contain a quote or a line break' "$CS" -b -q --csv -s '"'
[ -z "$(ls bad)" ] && pass "nothing written after the errors" || fail "written: $(ls bad)"
err=$("$BIN/combinesummaries" -q x.csv.gz -c 0 </dev/null 2>&1)
[ $? -eq 1 ] && [ "$err" == 'combinesummaries: invalid compression level "0" (expected 1…9)' ] &&
  pass "combinesummaries -c 0 -> $err" || fail "combinesummaries -c 0: $err"
finish
