"""results.sqlite (src/lab/npmlab/resultsdb.py) of a tiny real study, read back with Python's sqlite3, R
(DBI, RSQLite) and DuckDB, against the run directories, the scalar files, runs.csv and summary.csv;
createsummary --long beside it.

usage: test_resultsdb.py LAB_PROGRAM LAB_SOURCE_DIR CREATESUMMARY

The study (root: namespaces) has two combinations (a TCP or an MPTCP flow over two paths, each
beside a UDP flow in a pair of its own), run once and then resumed with a second repetition. The
scalar files' reader is also checked on its own, on the real files of a lab run in
tests/tools/data/lab-run, in all three compressions.
"""

import bz2
import csv
import gzip
import json
import math
import os
import shlex
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import unittest

LAB, LAB_SRC, CREATESUMMARY = sys.argv[1:4]
del sys.argv[1:4]
sys.path.insert(0, LAB_SRC)
from npmlab import resultsdb, scalars  # noqa: E402
from npmlab.topology import LabError  # noqa: E402

LAB_RUN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools", "data", "lab-run")

STUDY = """
name = "tinydb"
description = "a TCP or MPTCP flow over two paths, beside a UDP flow"
runtime = 1.5
repetitions = 1
[sweep]
proto = ["tcp", "mptcp"]
[[paths]]
rate = "10mbit"
queue = "30kB"
delay_ms = 5
[[paths]]
rate = "5mbit"
queue = "30kB"
delay_ms = 5
[[flows]]
protocol = "{proto}"
spec = "const0:const1400:const0:const0"
[[flows]]
protocol = "udp"
spec = "const100:const500:const0:const0"
[[metrics]]
name = "goodput"
value = "goodput(0) / 1e6"
unit = "Mbit/s"
[[metrics]]
name = "udp_goodput"
value = "goodput(1) / 1e6"
unit = "Mbit/s"
"""

# Beside other tests of the gating suite: their load must not make these runs invalid.
# The limits that depend on the host's load (other work, the processes' own CPU, the delay line's
# lateness) off: these tests run beside others, and what they check is not the load.
OTHER_LOAD = ("--max-other-load=1000", "--max-process-load=1000", "--max-lateness=1e12")
TABLES = ("runs", "scalars", "metrics", "summary")


def lab(*args, timeout=300):
    return subprocess.run([LAB, *args], capture_output=True, text=True, timeout=timeout)


def scalar_lines(path):
    """[(object, name, value)] of a scalar file as shlex reads it (value None for nan)."""
    opener = bz2.open if path.endswith(".bz2") else gzip.open if path.endswith(".gz") else open
    rows = []
    with opener(path, "rt") as f:
        for line in f:
            words = shlex.split(line)
            if words:
                assert words[0] == "scalar" and len(words) == 4, line
                value = float(words[3])
                rows.append((words[1], words[2], None if math.isnan(value) else value))
    return rows


def key(row):
    """A sort key of a row with NULLs."""
    return tuple((v is None, "" if v is None else v) for v in row)


class ScalarFiles(unittest.TestCase):
    """The reader of results.sqlite on real scalar files of a lab run, in all three compressions."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="npm-resultsdb-")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def test_three_compressions_read_alike(self):
        for pair in ("f0", "f1"):
            d = os.path.join(self.dir, pair)
            os.makedirs(d)
            source = os.path.join(LAB_RUN, pair, "run-active.sca.bz2")
            with bz2.open(source, "rb") as f:
                text = f.read()
            expected = scalar_lines(source)
            self.assertEqual(len(expected), text.count(b"\nscalar ") + 1)
            self.assertIn(None, [v for _, _, v in expected], "the file has nan values")
            variants = {"run-active.sca.bz2": bz2.compress(text), "run-active.sca.gz": gzip.compress(text),
                        "run-active.sca": text, "misnamed.sca": gzip.compress(text)}  # told by content
            for name, data in variants.items():
                path = os.path.join(d, name)
                with open(path, "wb") as f:
                    f.write(data)
                self.assertEqual(resultsdb.read_scalars(path), expected, name)
            # which file of a pair is read: .bz2 before .gz before plain
            self.assertEqual(scalars.scalar_files(d), {"active": os.path.join(d, "run-active.sca.bz2")})
            os.unlink(os.path.join(d, "run-active.sca.bz2"))
            self.assertEqual(scalars.scalar_files(d), {"active": os.path.join(d, "run-active.sca.gz")})
            os.unlink(os.path.join(d, "run-active.sca.gz"))
            self.assertEqual(scalars.scalar_files(d), {"active": os.path.join(d, "run-active.sca")})

    def test_truncated_and_malformed_files_name_the_file(self):
        with open(os.path.join(LAB_RUN, "f0", "run-passive.sca.bz2"), "rb") as f:
            data = f.read()
        text = bz2.decompress(data)
        cases = {"truncated.sca.bz2": (data[:len(data) // 2], r"truncated\.sca\.bz2: "),
                 "truncated.sca.gz": (gzip.compress(text)[:300], r"truncated\.sca\.gz: "),
                 "badvalue.sca": (text.replace(b'"Lost Bytes"              0', b'"Lost Bytes" 12abc'),
                                  r"badvalue\.sca:19: numeric value expected, got '12abc'"),
                 "badline.sca": (text + b"garbage\n", r"badline\.sca:89: not a scalar line: 'garbage'")}
        for name, (content, message) in cases.items():
            path = os.path.join(self.dir, name)
            with open(path, "wb") as f:
                f.write(content)
            with self.assertRaisesRegex(LabError, message):
                resultsdb.read_scalars(path)

    def test_side_flow_and_path_of_an_object(self):
        origin = scalars.scalar_origin  # results.sqlite's side, flow and path: its first three
        self.assertEqual(origin("netPerfMeter.active.flow[3].path[1]"), ("active", 3, 1, False))
        self.assertEqual(origin("netPerfMeter.passive.flow[0].connection"), ("passive", 0, None, True))
        self.assertEqual(origin("netPerfMeter.active.CPU[2]"), ("active", None, None, False))
        self.assertEqual(origin("netPerfMeter.passive.total"), ("passive", None, None, False))
        self.assertEqual(origin("scenario.host[1].app"), (None, None, None, False))
        self.assertEqual(origin("netPerfMeter.active.flow[x].path[1]"), ("active", None, None, False))


@unittest.skipUnless(os.geteuid() == 0, "network namespaces need root")
class Study(unittest.TestCase):
    """A tiny real study: results.sqlite after run, after run --resume, and from db."""

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="npmlab-test-")
        cls.study = os.path.join(cls.dir, "tinydb.toml")
        with open(cls.study, "w") as f:
            f.write(STUDY)
        cls.out = os.path.join(cls.dir, "out")
        cls.db_path = os.path.join(cls.out, "results.sqlite")
        r = lab("run", cls.study, *OTHER_LOAD, "-o", cls.out, "--no-plot")
        assert r.returncode == 0, r.stderr + r.stdout
        cls.first_stdout = r.stdout
        with sqlite3.connect(cls.db_path) as db:
            cls.first_runs = sorted(row[0] for row in db.execute("SELECT run FROM runs"))
        r = lab("run", cls.study, *OTHER_LOAD, "-o", cls.out, "--no-plot", "--resume", "--repetitions=2")
        assert r.returncode == 0, r.stderr + r.stdout
        cls.resume_stderr = r.stderr

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def setUp(self):
        self.db = sqlite3.connect(f"file:{self.db_path}?mode=ro", uri=True)

    def tearDown(self):
        self.db.close()

    def query(self, sql, *args):
        return self.db.execute(sql, args).fetchall()

    def run_dirs(self):
        runs = os.path.join(self.out, "runs")
        return sorted(e for e in os.listdir(runs) if not e.startswith("."))

    def csv_rows(self, name):
        with open(os.path.join(self.out, name), newline="") as f:
            return list(csv.DictReader(f))

    def test_runs_are_the_run_directories_and_resume_rebuilds_them(self):
        self.assertIn(f"database: {self.db_path}", self.first_stdout)
        self.assertEqual(self.first_runs, ["proto=mptcp-r1", "proto=tcp-r1"])
        self.assertEqual(self.resume_stderr.count("complete, kept"), 2, self.resume_stderr)
        self.assertEqual(self.run_dirs(), ["proto=mptcp-r1", "proto=mptcp-r2", "proto=tcp-r1", "proto=tcp-r2"])
        self.assertEqual([e for e in os.listdir(self.out) if e.endswith(".tmp")], [])
        columns = [row[1] for row in self.query("PRAGMA table_info(runs)")]
        self.assertEqual(columns, ["run", "proto"] + resultsdb.RUN_COLUMNS[1:])
        runs = {row[0]: row for row in self.query("SELECT * FROM runs")}
        self.assertEqual(sorted(runs), self.run_dirs())
        recorded = {f"proto={row['proto']}-r{row['repetition']}": row for row in self.csv_rows("runs.csv")}
        self.assertEqual(sorted(recorded), sorted(runs))
        for run, row in runs.items():
            fields = dict(zip(columns, row))
            self.assertEqual(f"proto={fields['proto']}-r{fields['repetition']}", run)
            self.assertIsInstance(fields["repetition"], int)
            self.assertEqual(fields["validity"], recorded[run]["validity"])
            self.assertEqual(fields["problems"] or "", recorded[run]["problems"])
            self.assertEqual(fields["exit_status"], 0)
            self.assertEqual(fields["failed_attempts"], 0)
            self.assertEqual(json.loads(fields["attempts"]), {"attempts": 1, "failed": []})
            self.assertEqual(str(fields["failed_attempts"]), recorded[run]["failed_attempts"])
            self.assertTrue(fields["kernel"].startswith(os.uname().release), fields["kernel"])
            self.assertTrue(fields["netperfmeter"].startswith("NetPerfMeter"), fields["netperfmeter"])
            self.assertGreater(fields["started"], os.stat(self.study).st_mtime - 1)
            self.assertGreaterEqual(fields["host_own_cores"], 0)
            self.assertGreaterEqual(fields["settle_s"], 0)
            with open(os.path.join(self.out, "runs", run, "environment.txt")) as f:
                self.assertEqual(fields["environment"], f.read())
        meta = dict(self.query("SELECT key, value FROM meta"))
        self.assertEqual((meta["schema_version"], meta["study"]), ("3", "tinydb"))
        self.assertEqual(json.loads(meta["variables"]), ["proto"])
        with open(os.path.join(self.out, "lab.json")) as f:
            self.assertEqual(int(meta["seed"]), json.load(f)["seed"])
        indices = {row[0] for row in self.query("SELECT name FROM sqlite_master WHERE type = 'index'")}
        self.assertTrue({"scalars_run", "scalars_name", "metrics_metric", "summary_metric"} <= indices, indices)

    def test_scalars_are_every_line_of_both_sides_scalar_files(self):
        files = {}
        for run in self.run_dirs():
            for pair in ("f0", "f1"):
                for side in ("active", "passive"):
                    path = os.path.join("runs", run, pair, f"run-{side}.sca.bz2")
                    files[path] = (run, side, scalar_lines(os.path.join(self.out, path)))
        self.assertEqual(self.query("SELECT count(*) FROM scalars")[0][0], sum(len(v[2]) for v in files.values()))
        self.assertEqual(sorted(row[0] for row in self.query("SELECT DISTINCT file FROM scalars")), sorted(files))
        for path, (run, side, lines) in files.items():
            rows = self.query("SELECT run, side, object, name, value FROM scalars WHERE file = ?", path)
            self.assertEqual(sorted(rows, key=key), sorted([(run, side, *line) for line in lines], key=key), path)
        for obj, side, flow, path in self.query("SELECT DISTINCT object, side, flow, path FROM scalars"):
            parts = obj.split(".")
            self.assertEqual(side, parts[1], obj)
            self.assertEqual(flow, int(parts[2][5:-1]) if parts[2].startswith("flow[") else None, obj)
            self.assertEqual(path, int(parts[3][5:-1]) if len(parts) > 3 and parts[3].startswith("path[") else None,
                             obj)
        # the pairs' flows keep their numbers; MPTCP's subflows are paths 1 and 2 of flow 0
        self.assertEqual(self.query("SELECT DISTINCT flow FROM scalars WHERE file LIKE '%/f1/%' AND flow IS NOT NULL"),
                         [(1,)])
        paths = self.query("SELECT DISTINCT path FROM scalars JOIN runs USING (run) WHERE proto = 'mptcp' AND "
                           "side = 'active' AND flow = 0 AND path IS NOT NULL ORDER BY path")
        self.assertEqual(paths, [(1,), (2,)])

    def test_metrics_are_runs_csv_and_give_summary_csv(self):
        runs = {f"proto={row['proto']}-r{row['repetition']}": row for row in self.csv_rows("runs.csv")}
        metrics = {(run, metric): (source, value) for run, metric, source, value in self.query("SELECT * FROM metrics")}
        names = [c for c in next(iter(runs.values()))
                 if c not in ("proto", "repetition", "failed_attempts", "validity", "problems")]
        self.assertIn("cpu_active", names)
        for run, row in runs.items():
            for name in names:
                if row[name] == "NA":
                    self.assertNotIn((run, name), metrics)
                    continue
                source, value = metrics[(run, name)]
                self.assertEqual(source, "study" if name in ("goodput", "udp_goodput") else "recorded", name)
                self.assertEqual(value, float(row[name]), (run, name))
        summary = self.csv_rows("summary.csv")
        self.assertGreater(len(summary), 4)
        for row in summary:
            values = [v for (run, metric), (_, v) in metrics.items() if metric == row["metric"]
                      and runs[run]["proto"] == row["proto"] and runs[run]["validity"] != "invalid"]
            self.assertEqual(len(values), int(row["n"]), row)
            self.assertAlmostEqual(sum(values) / len(values), float(row["mean"]), delta=1e-12 * abs(float(row["mean"])))
        table = self.query("SELECT * FROM summary")
        self.assertEqual([row[1] for row in self.query("PRAGMA table_info(summary)")],
                         ["proto"] + resultsdb.SUMMARY_COLUMNS)
        expected = [[row["proto"], row["metric"], int(row["n"])] +
                    [None if row[c] == "NA" else float(row[c]) for c in ("mean", "ci_low", "ci_high")] +
                    [row["procedure"], int(row["n_invalid"])] +
                    [None if row[c] in ("", "NA") else float(row[c])
                     for c in ("median", "low_mode_mean", "high_mode_mean", "high_mode_fraction")] +
                    [int(row["failed_attempts"])]
                    for row in summary]
        self.assertEqual([list(row) for row in table], expected)

    def test_db_rebuilds_it_from_the_directory(self):
        dumped = {t: sorted(self.query(f"SELECT * FROM {t}"), key=key) for t in TABLES}
        copy = os.path.join(self.dir, "copy")
        shutil.copytree(self.out, copy)
        os.unlink(os.path.join(copy, "results.sqlite"))
        r = lab("db", copy)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("database: " + os.path.join(copy, "results.sqlite"), r.stdout)
        with sqlite3.connect(os.path.join(copy, "results.sqlite")) as db:
            for table, rows in dumped.items():  # files relative to the directory: the same rows
                self.assertEqual(sorted(db.execute(f"SELECT * FROM {table}").fetchall(), key=key), rows, table)
        r = lab("db", self.dir)
        self.assertEqual(r.returncode, 1)
        self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
        self.assertIn("not a netperfmeter-lab results directory", r.stderr)

    def createsummary(self, directory, *options):
        """createsummary on the study's own input (results.summary), its outputs in `directory`."""
        with open(os.path.join(self.out, "results.summary")) as f:
            commands = f.read().replace("--resultsdirectory=tables", f"--resultsdirectory={directory}")
        r = subprocess.run([CREATESUMMARY, "-b", "-q", *options], input=commands, cwd=self.out, capture_output=True,
                           text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_createsummary_long_is_the_scalars_table(self):
        long_dir = os.path.join(self.dir, "long")
        self.createsummary(long_dir, "--long", "--compression=gzip")
        with gzip.open(os.path.join(long_dir, "scalars.csv.gz"), "rt", newline="") as f:
            records = list(csv.reader(f))
        self.assertEqual(records[0], ["proto", "Repetition", "Pair", "file", "RunNo", "side", "flow", "path", "object",
                                      "name", "value"])
        got = sorted(((r[3], r[5] or None, int(r[6]) if r[6] else None, int(r[7]) if r[7] else None, r[8], r[9],
                       float(r[10]) if r[10] else None) for r in records[1:]), key=key)
        rows = sorted(self.query("SELECT file, side, flow, path, object, name, value FROM scalars"), key=key)
        self.assertEqual(got, rows)
        runs = {run: (proto, rep) for run, proto, rep in self.query("SELECT run, proto, repetition FROM runs")}
        for r in records[1:]:
            self.assertEqual((r[0], int(r[1])), runs[r[3].split("/")[1]], r)
            self.assertEqual(r[2], r[3].split("/")[2][1:], r)

    def test_r_reads_the_database(self):
        probe = subprocess.run(["Rscript", "-e", "suppressMessages({library(DBI); library(RSQLite)})"],
                               capture_output=True, text=True)
        if probe.returncode != 0:
            print("R: DBI and RSQLite are not installed (Debian: r-cran-rsqlite): results.sqlite not read from R")
            self.skipTest("RSQLite is not installed (r-cran-rsqlite)")
        script = r"""
            suppressMessages({library(DBI); library(RSQLite)})
            con <- dbConnect(SQLite(), commandArgs(TRUE)[1], flags = SQLITE_RO)
            runs <- dbReadTable(con, "runs")
            stopifnot(is.character(runs$proto), is.integer(runs$repetition), is.numeric(runs$started),
                      all(runs$validity %in% c("valid", "invalid", "unchecked")))
            means <- dbGetQuery(con, "SELECT proto, metric, avg(value) AS mean, count(*) AS n FROM metrics
                                      JOIN runs USING (run) WHERE validity != 'invalid' GROUP BY proto, metric")
            summary <- dbReadTable(con, "summary")
            both <- merge(means, summary, by = c("proto", "metric"))
            stopifnot(nrow(both) == nrow(summary), all(both$n.x == both$n.y),
                      all(abs(both$mean.x - both$mean.y) <= 1e-9 * abs(both$mean.y)))
            paths <- dbGetQuery(con, "SELECT run, path, value AS bytes FROM scalars JOIN runs USING (run)
                                      WHERE proto = 'mptcp' AND side = 'active' AND flow = 0 AND path IS NOT NULL
                                      AND name = 'Bytes Sent'")
            stopifnot(nrow(paths) == 4, all(paths$bytes > 0))
            n <- dbGetQuery(con, "SELECT count(*) AS n FROM scalars")$n
            cat(sprintf("R read %d runs, %d scalars, %d summary rows\n", nrow(runs), n, nrow(summary)))
        """
        r = subprocess.run(["Rscript", "--vanilla", "-e", script, self.db_path], capture_output=True, text=True,
                           timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr + r.stdout)
        counts = [self.query(f"SELECT count(*) FROM {t}")[0][0] for t in ("runs", "scalars", "summary")]
        self.assertIn("R read %d runs, %d scalars, %d summary rows" % tuple(counts), r.stdout)
        print(r.stdout.strip())

    def test_duckdb_reads_the_csv_outputs_and_the_database(self):
        """DuckDB (from PyPI, in a venv of its own) reads createsummary's --csv tables (gzip and plain)
        and --long file as they are, and results.sqlite through its sqlite extension where it can
        install that."""
        venv = os.path.join(self.dir, "venv")
        python = os.path.join(venv, "bin", "python")
        if not os.path.exists(python):
            made = subprocess.run([sys.executable, "-m", "venv", venv], capture_output=True, text=True)
            pip = subprocess.run([python, "-m", "pip", "install", "-q", "duckdb"], capture_output=True, text=True,
                                 timeout=600) if made.returncode == 0 else made
            if pip.returncode != 0:
                reason = (pip.stderr.strip().splitlines() or ["no output"])[-1]
                print(f"DuckDB: pip install duckdb in a venv failed ({reason}): not checked")
                self.skipTest(f"pip install duckdb failed: {reason}")
        gz, plain = os.path.join(self.dir, "csv-gzip"), os.path.join(self.dir, "csv-plain")
        self.createsummary(gz, "--csv", "--long", "--compression=gzip")
        self.createsummary(plain, "--csv", "--compression=none")
        script = r"""
import duckdb, json, sys
gz, plain = sys.argv[1:3]
con = duckdb.connect()
table = "passive.flow-ReceivedBitRate"
out = {"long": con.sql(f"SELECT file, side, flow, path, object, name, value FROM '{gz}/scalars.csv.gz'").fetchall()}
for name, path in (("gzip", f"{gz}/{table}.csv.gz"), ("plain", f"{plain}/{table}.csv")):
    out[name] = con.sql(f'SELECT proto, Repetition, Pair, "passive.flow", "{table}" FROM \'{path}\'').fetchall()
out["per_path"] = con.sql(f"SELECT proto, flow, path, avg(value) FROM '{gz}/scalars.csv.gz' WHERE side = 'active' "
                          "AND name = 'Bytes Sent' AND path IS NOT NULL GROUP BY ALL ORDER BY ALL").fetchall()
json.dump(out, sys.stdout)
"""
        r = subprocess.run([python, "-c", script, gz, plain], capture_output=True, text=True, timeout=300)
        self.assertEqual(r.returncode, 0, r.stderr)
        out = json.loads(r.stdout)
        rows = sorted(self.query("SELECT file, side, flow, path, object, name, value FROM scalars"), key=key)
        self.assertEqual(sorted(map(tuple, out["long"]), key=key), rows)
        received = sorted((proto, rep, int(file.split("/")[2][1:]), flow, round(value, 6))
                          for proto, rep, file, flow, value in self.query(
                              "SELECT proto, repetition, file, flow, value FROM scalars JOIN runs USING (run) "
                              "WHERE side = 'passive' AND path IS NULL AND object LIKE 'netPerfMeter.passive.flow[%]' "
                              "AND name = 'Received Bit Rate'"))
        self.assertEqual(len(received), 8)
        self.assertEqual(sorted(map(tuple, out["gzip"])), received)
        self.assertEqual(sorted(map(tuple, out["plain"])), received)
        per_path = self.query("SELECT proto, flow, path, avg(value) FROM scalars JOIN runs USING (run) WHERE "
                              "side = 'active' AND name = 'Bytes Sent' AND path IS NOT NULL GROUP BY 1, 2, 3 "
                              "ORDER BY 1, 2, 3")
        self.assertEqual([tuple(row[:3]) for row in out["per_path"]], [row[:3] for row in per_path])
        for got, want in zip(out["per_path"], per_path):
            self.assertAlmostEqual(got[3], want[3], delta=1e-9 * want[3])
        # results.sqlite itself through DuckDB's sqlite extension, where it can be installed
        attach = r"""
import duckdb, json, sys
con = duckdb.connect()
con.sql("INSTALL sqlite")
con.sql("LOAD sqlite")
con.sql(f"ATTACH '{sys.argv[1]}' AS lab (TYPE sqlite, READ_ONLY)")
json.dump({t: con.sql(f"SELECT count(*) FROM lab.{t}").fetchone()[0] for t in sys.argv[2:]}, sys.stdout)
"""
        try:
            r = subprocess.run([python, "-c", attach, self.db_path, *TABLES], capture_output=True, text=True,
                               timeout=120)
            problem = None if r.returncode == 0 else (r.stderr.strip().splitlines() or ["no output"])[-1]
        except subprocess.TimeoutExpired:
            problem = "no answer within 120 s"
        if problem is None:
            self.assertEqual(json.loads(r.stdout), {t: self.query(f"SELECT count(*) FROM {t}")[0][0] for t in TABLES})
            print("DuckDB read results.sqlite, the --long file and the --csv tables (gzip, plain)")
        else:
            print(f"DuckDB read the --long file and the --csv tables (gzip, plain); its sqlite extension cannot be "
                  f"installed here ({problem}): results.sqlite not read by DuckDB")


class SampleDatabase(unittest.TestCase):
    """The sample results.sqlite of netperfmeter-examples (packaging/examples/results/lab, made by
    packaging/examples/make-sample-lab-results from a real study run): it opens, and its schema is
    the one resultsdb writes today for its study (tables, columns, indexes, the meta keys and
    schema_version), so that it cannot go stale unnoticed. No root, no runs."""

    SAMPLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "packaging", "examples", "results",
                          "lab")

    def test_the_shipped_database_has_todays_schema(self):
        from npmlab import study as studymod
        from npmlab.runner import Runner, Tools
        study = studymod.load(os.path.join(self.SAMPLE, "study.toml"))
        shipped = sqlite3.connect(f"file:{os.path.join(self.SAMPLE, resultsdb.NAME)}?mode=ro", uri=True)
        today = sqlite3.connect(":memory:")
        today.executescript(resultsdb._schema(study))
        schema = "SELECT type, name, tbl_name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' ORDER BY name"
        normal = lambda rows: [(t, n, tb, " ".join((sql or "").split())) for t, n, tb, sql in rows]  # noqa: E731
        self.assertEqual(normal(shipped.execute(schema).fetchall()), normal(today.execute(schema).fetchall()),
                         "the sample's schema is not resultsdb's: run packaging/examples/make-sample-lab-results "
                         "packaging/examples/results again")
        meta = dict(shipped.execute("SELECT key, value FROM meta"))
        with tempfile.TemporaryDirectory() as empty:
            self.assertEqual(sorted(meta), sorted(resultsdb._meta(Runner(study, empty, Tools({})))))
        self.assertEqual(meta["schema_version"], str(resultsdb.SCHEMA_VERSION))
        self.assertEqual(meta["study"], study.name)
        # a real study: every run with its scalars and metrics, the summary from them
        runs = [r for r, in shipped.execute("SELECT run FROM runs ORDER BY run")]
        self.assertEqual(len(runs), len(list(study.combinations())) * study.repetitions)
        for run in runs:
            (n,), = shipped.execute("SELECT COUNT(*) FROM scalars WHERE run = ? AND name = 'Received Bytes'", (run,))
            self.assertGreater(n, 0, run)
        for (proto, n, mean), in zip(shipped.execute(
                "SELECT proto, n, mean FROM summary WHERE metric = 'goodput' ORDER BY proto")):
            (average, count), = shipped.execute("SELECT AVG(m.value), COUNT(*) FROM metrics m JOIN runs r USING (run) "
                                                "WHERE m.metric = 'goodput' AND r.proto = ? AND r.validity = 'valid'",
                                                (proto,))
            self.assertEqual(n, count)
            self.assertAlmostEqual(mean, average, places=6)


def main():
    result = unittest.main(exit=False, verbosity=2).result
    if result.testsRun == len(result.skipped) and result.testsRun > 0:
        sys.exit(77)  # everything skipped: tell ctest
    sys.exit(0 if result.wasSuccessful() else 1)


if __name__ == "__main__":
    main()
