"""results.sqlite: a results directory as one SQLite database (Python's sqlite3 module), for SQL, R
(DBI with RSQLite), pandas, or DuckDB's sqlite extension. Rebuilt from the runs on disk whenever
summary.csv is (run, run --resume, plot, db), into a temporary file renamed into place.

Tables (schema version 3):
  meta      key, value: schema_version, study, description, quick, seed, ci_target, level,
            variables (JSON list), metrics (JSON list of name, unit, formula), created (UTC),
            topology (disjoint, shared, hosts), hosts (topology hosts: the pairs, their paths'
            addresses, the service, the cross traffic and the clock bound as JSON; else NULL)
  runs      one row per complete run of the study (those summary.csv rests on): run (its directory
            under runs/), one column per sweep variable (INTEGER, REAL or TEXT as its values are),
            repetition, validity (valid, invalid, unchecked), problems (why a run is invalid,
            "; "-joined as in runs.csv, NULL when none), exit_status (the largest of the run's
            active netperfmeters' exit statuses: 0 in every complete run, since another fails the
            run; NULL for runs made before it was recorded), started (the first START, seconds since
            the epoch), kernel, netperfmeter, python (environment.txt), host_busy_cores,
            host_own_cores, host_foreign_cores (evidence.json), settle_s (settle.txt), environment
            (environment.txt, whole), hosts (topology hosts: the run's hosts.json, each host's
            environment as JSON: {"active": {...}, "passive": {...}} with destination, kernel, uname,
            sysctl, congestion_controls, qdisc_before, qdisc_after, interfaces (offloads, driver),
            versions, clock; query it with json_extract(); NULL for the namespace test beds),
            failed_attempts (the attempts that failed before the run, as in runs.csv; NULL for runs
            made before the lab kept them), attempts (attempts.json: the number of attempts and
            each failed one's error as JSON; NULL then too)
  scalars   run, file, side, flow, path, object, name, value: every scalar of both sides' scalar
            files of every pair of the run (.sca, .sca.bz2 or .sca.gz: scalars.scalar_files()), one row
            each (scalars.py reads them). file as in results.summary (relative to the results
            directory), object and name as written, side/flow/path from the object
            (scalars.scalar_origin(): createsummary --long's rule), value NULL where the file says
            nan (SQLite stores no NaN)
  metrics   run, metric, source, value: per run the study's metrics (source "study") and those every
            run records (source "recorded"), as runs.csv has them and summary.csv is computed from
  summary   summary.csv as it is: the variables, metric, n, mean, ci_low, ci_high, procedure, n_invalid,
            median, low_mode_mean, high_mode_mean, high_mode_fraction, failed_attempts (NA and empty
            fields as NULL)

Each sweep variable is a column of runs and summary: a study's variables are fixed, so queries and
R data frames need no pivot. A variable may not have the name of another column (check()).
"""

import csv
import json
import math
import os
import re
import sqlite3
from datetime import datetime, timezone

from . import scalars
from .runner import LEVEL, failed_attempts, pair_dirs, run_attempts, run_evidence, run_validity, start_time
from .errors import LabError

NAME = "results.sqlite"
SCHEMA_VERSION = 3

RUN_COLUMNS = ["run", "repetition", "validity", "problems", "exit_status", "started", "kernel", "netperfmeter",
               "python", "host_busy_cores", "host_own_cores", "host_foreign_cores", "settle_s", "environment", "hosts",
               "failed_attempts", "attempts"]
SUMMARY_COLUMNS = ["metric", "n", "mean", "ci_low", "ci_high", "procedure", "n_invalid", "median",
                   "low_mode_mean", "high_mode_mean", "high_mode_fraction", "failed_attempts"]


def _quote(identifier):
    return '"' + identifier.replace('"', '""') + '"'


def check(study):
    """Raises LabError if a sweep variable has the name of a fixed column of runs or summary
    (SQLite's names are case-insensitive)."""
    fixed = {c.lower() for c in RUN_COLUMNS + SUMMARY_COLUMNS}
    for var in study.variables:
        if var.lower() in fixed:
            raise LabError(f"the sweep variable {var} has the name of a column of {NAME} "
                           f"({', '.join(sorted(fixed))}): rename it")


def read_scalars(path):
    """[(object, name, value)] of every scalar line of a scalar file (scalars.scalar_rows(); value
    None for nan: SQLite stores no NaN); a malformed, truncated or corrupt file raises LabError
    naming the file (and line)."""
    try:
        return [(obj, name, None if math.isnan(value) else value) for obj, name, value in scalars.scalar_rows(path)]
    except ValueError as e:
        raise LabError(str(e)) from None


def _environment(run_dir):
    """(text, {key: value}) of a run's environment.txt (its "key: value" lines)."""
    try:
        with open(os.path.join(run_dir, "environment.txt"), errors="replace") as f:
            text = f.read()
    except OSError:
        return None, {}
    fields = {}
    for line in text.splitlines():
        key, sep, value = line.partition(": ")
        if sep and key in ("kernel", "netperfmeter", "python", "exit status"):
            fields[key] = value.strip()
    return text, fields


def _settle(run_dir):
    try:
        with open(os.path.join(run_dir, "settle.txt")) as f:
            m = re.match(r"waited ([0-9.]+) s", f.read())
    except OSError:
        return None
    return float(m.group(1)) if m else None


def _hosts(run_dir):
    """A run's hosts.json as compact JSON text (None for a run on namespaces)."""
    try:
        with open(os.path.join(run_dir, "hosts.json")) as f:
            return json.dumps(json.load(f), sort_keys=True, separators=(",", ":"))
    except (OSError, ValueError):
        return None


def _run_row(runner, values, rep, run_dir):
    study = runner.study
    judged = run_evidence(run_dir)
    text, env = _environment(run_dir)
    codes = [int(c) for c in env.get("exit status", "").split() if c.lstrip("-").isdigit()]
    starts = [t for t in (start_time(os.path.join(d, "active.log")) for d in pair_dirs(run_dir)) if t is not None]
    host = judged.get("host") or {}
    attempts = run_attempts(run_dir)
    return ([os.path.basename(run_dir)] + [_typed(study, v, values[v]) for v in study.variables] +
            [rep, run_validity(judged), "; ".join(judged.get("problems", [])) or None, max(codes) if codes else None,
             min(starts) if starts else None, env.get("kernel"), env.get("netperfmeter"), env.get("python"),
             host.get("busy_cores"), host.get("own_cores"), host.get("foreign_cores"), _settle(run_dir), text,
             _hosts(run_dir), failed_attempts(run_dir), json.dumps(attempts, sort_keys=True) if attempts else None])


def _affinity(values):
    if all(isinstance(v, int) for v in values):
        return "INTEGER"
    if all(isinstance(v, (int, float)) for v in values):
        return "REAL"
    return "TEXT"


def _typed(study, var, value):
    return str(value) if _affinity(study.sweep[var]) == "TEXT" else value


def _summary_rows(runner):
    """summary.csv's rows, typed: the variables as in the study, numbers as numbers, NA as NULL."""
    study = runner.study
    by_text = {var: {str(v): _typed(study, var, v) for v in study.sweep[var]} for var in study.variables}
    path = os.path.join(runner.outdir, "summary.csv")
    try:
        with open(path, newline="") as f:
            records = list(csv.reader(f))
    except OSError as e:
        raise LabError(f"{path}: {e.strerror}")
    if not records or records[0] != study.variables + SUMMARY_COLUMNS:
        raise LabError(f"{path}: not the summary of this study (its header differs)")
    k = len(study.variables)

    def number(text, kind=float):
        return None if text in ("", "NA") else kind(text)

    rows = []
    for r in records[1:]:
        fields = dict(zip(SUMMARY_COLUMNS, r[k:]))
        rows.append([by_text[var][text] for var, text in zip(study.variables, r[:k])] +
                    [fields["metric"], number(fields["n"], int)] +
                    [number(fields[c]) for c in ("mean", "ci_low", "ci_high")] +
                    [fields["procedure"], number(fields["n_invalid"], int)] +
                    [number(fields[c]) for c in ("median", "low_mode_mean", "high_mode_mean", "high_mode_fraction")] +
                    [number(fields["failed_attempts"], int)])
    return rows


def _schema(study):
    variables = [f"{_quote(v)} {_affinity(study.sweep[v])}" for v in study.variables]
    return f"""
        CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT);
        CREATE TABLE runs (run TEXT PRIMARY KEY, {''.join(v + ', ' for v in variables)}
            repetition INTEGER NOT NULL,
            validity TEXT NOT NULL CHECK (validity IN ('valid', 'invalid', 'unchecked')), problems TEXT,
            exit_status INTEGER, started REAL, kernel TEXT, netperfmeter TEXT, python TEXT,
            host_busy_cores REAL, host_own_cores REAL, host_foreign_cores REAL, settle_s REAL, environment TEXT,
            hosts TEXT, failed_attempts INTEGER, attempts TEXT);
        CREATE TABLE scalars (run TEXT NOT NULL REFERENCES runs(run), file TEXT NOT NULL,
            side TEXT CHECK (side IN ('active', 'passive')), flow INTEGER, path INTEGER, object TEXT NOT NULL,
            name TEXT NOT NULL, value REAL);
        CREATE INDEX scalars_run ON scalars (run, side, flow, path);
        CREATE INDEX scalars_name ON scalars (name, side, flow);
        CREATE TABLE metrics (run TEXT NOT NULL REFERENCES runs(run), metric TEXT NOT NULL,
            source TEXT NOT NULL CHECK (source IN ('study', 'recorded')), value REAL, PRIMARY KEY (run, metric));
        CREATE INDEX metrics_metric ON metrics (metric);
        CREATE TABLE summary ({''.join(v + ', ' for v in variables)}metric TEXT NOT NULL, n INTEGER,
            mean REAL, ci_low REAL, ci_high REAL, procedure TEXT, n_invalid INTEGER, median REAL,
            low_mode_mean REAL, high_mode_mean REAL, high_mode_fraction REAL, failed_attempts INTEGER);
        CREATE INDEX summary_metric ON summary (metric);
    """


def _meta(runner):
    study = runner.study
    try:
        with open(os.path.join(runner.outdir, "lab.json")) as f:
            lab = json.load(f)
    except (OSError, ValueError):
        lab = {}
    return {"schema_version": SCHEMA_VERSION, "study": study.name, "description": study.description,
            "quick": json.dumps(bool(lab.get("quick"))), "seed": runner.seed, "ci_target": runner.ci_target,
            "level": LEVEL, "variables": json.dumps(study.variables),
            "metrics": json.dumps([{"name": m.name, "unit": m.unit, "formula": m.formula} for m in study.metrics]),
            "created": datetime.now(timezone.utc).isoformat(timespec="seconds"), "topology": study.topology,
            "hosts": json.dumps(study.hosts.describe()) if study.hosts is not None else None}


def _fill(db, runner):
    study = runner.study
    names = {m.name for m in study.metrics}
    db.executemany("INSERT INTO meta VALUES (?, ?)",
                   [(k, None if v is None else str(v)) for k, v in _meta(runner).items()])
    run_marks = ", ".join("?" * (len(RUN_COLUMNS) + len(study.variables)))
    for values, rep, run_dir in runner.runs_done():
        run = os.path.basename(run_dir)
        db.execute(f"INSERT INTO runs VALUES ({run_marks})", _run_row(runner, values, rep, run_dir))
        for d in pair_dirs(run_dir):
            for path in scalars.scalar_files(d).values():
                file = os.path.relpath(path, runner.outdir)
                db.executemany("INSERT INTO scalars VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                               [(run, file, *scalars.scalar_origin(obj)[:3], obj, name, value)
                                for obj, name, value in read_scalars(path)])
        metrics = runner.metrics_of(run_dir, values)
        metrics.update(runner.recorded_metrics(run_dir))
        db.executemany("INSERT INTO metrics VALUES (?, ?, ?, ?)",
                       [(run, k, "study" if k in names else "recorded", v) for k, v in sorted(metrics.items())])
    marks = ", ".join("?" * (len(SUMMARY_COLUMNS) + len(study.variables)))
    db.executemany(f"INSERT INTO summary VALUES ({marks})", _summary_rows(runner))


def write(runner):
    """Writes DIR/results.sqlite from the runs on disk and DIR/summary.csv (summarize() first):
    built in a temporary file beside it, synced and renamed into place. Returns its path."""
    check(runner.study)
    final = os.path.join(runner.outdir, NAME)
    temporary = os.path.join(runner.outdir, f".{NAME}.{os.getpid()}.tmp")
    try:
        if os.path.exists(temporary):
            os.unlink(temporary)
        db = sqlite3.connect(temporary)
        try:
            db.execute("PRAGMA journal_mode = OFF")  # a temporary file: rebuilt, never updated
            db.execute("PRAGMA synchronous = OFF")   # synced below, once
            db.executescript(_schema(runner.study))
            with db:
                _fill(db, runner)
        finally:
            db.close()
        with open(temporary, "rb") as f:
            os.fsync(f.fileno())
        os.replace(temporary, final)
        directory = os.open(runner.outdir, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)
    except (sqlite3.Error, OSError) as e:
        raise LabError(f"{final}: not written: {e}")
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)
    return final
