"""How long a run must last: the running mean of a flow's per-interval goodput, and the time after
which it stays within a stated tolerance of its final value (netperfmeter-lab(1), CONVERGENCE).

A study's metric is the mean over the measured part of each run (after the warm-up). Whether that
part is long enough shows in longer runs: if the running mean of the per-interval goodput, taken
from the end of the warm-up, still moves by more than the tolerance after T seconds, runs of T
seconds measure a value that a longer run would not confirm. `settling()` gives, for one series,
the first time from which the running mean stays within +-tolerance of its final value up to the
end; `netperfmeter-lab convergence DIR` applies it to every flow of every run of a results
directory whose runs recorded vectors (-vector=...: the passive's per-flow vector, received bytes
over time) and says per cell whether runs of a given length (--length) would have settled.

A run has settled within its own length only when the running mean stayed inside the band for at
least the last half of it (settled <= measured / 2): a running mean that enters the band just
before the end says nothing about where it is going."""

import bisect
import bz2
import csv
import glob
import gzip
import json
import math
import os

NAME = "convergence.csv"
FIELDS = ("run", "repetition", "flow", "measured_s", "final", "settled_s", "settled_within_run", "within_length")


def running_means(values):
    """The running means of a series: the k-th is the mean of its first k values."""
    out, total = [], 0.0
    for k, v in enumerate(values, 1):
        total += v
        out.append(total / k)
    return out


def settling(values, interval, tolerance):
    """{"final", "settled_s", "measured_s", "running"} of a series of per-interval values, each over
    `interval` seconds: the running mean's final value, and the time (seconds from the series'
    start, a multiple of the interval) from which the running mean stays within
    +-tolerance * |final| of it to the end. An empty series gives nan and None."""
    if interval <= 0 or tolerance < 0:
        raise ValueError(f"interval {interval} and tolerance {tolerance}: an interval above 0 and a tolerance of "
                         "at least 0 are needed")
    running = running_means(values)
    if not running:
        return {"final": math.nan, "settled_s": None, "measured_s": 0.0, "running": []}
    final = running[-1]
    band = tolerance * abs(final)
    settled = len(running)  # the last mean is the final value itself
    for k in range(len(running) - 1, -1, -1):
        if abs(running[k] - final) > band + 1e-12 * max(1.0, abs(final)):
            break
        settled = k
    # the running mean over the first (settled + 1) intervals is the first of those that stay
    return {"final": final, "settled_s": (settled + 1) * interval, "measured_s": len(running) * interval,
            "running": running}


def _vector_rows(path):
    """(RelTime, AbsBytes) of a netperfmeter per-flow vector (plain, .bz2 or .gz; rows may carry
    their line number before the columns of the header)."""
    opener = bz2.open if path.endswith(".bz2") else gzip.open if path.endswith(".gz") else open
    times, totals = [], []
    try:
        with opener(path, "rt") as f:
            header = f.readline().rstrip("\n").split("\t")
            if "RelTime" not in header or "AbsBytes" not in header:
                raise ValueError(f"{path}: not a per-flow vector (no RelTime and AbsBytes columns)")
            t, b = header.index("RelTime"), header.index("AbsBytes")
            for number, line in enumerate(f, 2):
                parts = line.rstrip("\n").split("\t")
                if len(parts) == len(header) + 1:
                    parts = parts[1:]
                try:
                    times.append(float(parts[t]))
                    totals.append(int(parts[b]))
                except (ValueError, IndexError):
                    raise ValueError(f"{path}:{number}: not a vector row: {line.strip()[:80]!r}") from None
    except (OSError, EOFError) as e:
        raise ValueError(f"{path}: {e}") from None
    return times, totals


def interval_goodput(path, start, end, interval):
    """The flow's goodput (bit/s) in each interval of `interval` seconds from `start` to `end`
    (seconds of the vector's RelTime), from its received bytes over time; a last part shorter than
    an interval is left out."""
    times, totals = _vector_rows(path)

    def bytes_at(t):  # received bytes at time t (the last row at or before it)
        i = bisect.bisect_right(times, t)
        return totals[i - 1] if i else 0

    count = int(math.floor((end - start) / interval + 1e-9))
    return [8.0 * (bytes_at(start + (k + 1) * interval) - bytes_at(start + k * interval)) / interval
            for k in range(count)]


def _study_times(directory):
    """(runtime, warmup) of a results directory's study, as it was run (lab.json and study.toml)."""
    from . import study as studymod
    try:
        with open(os.path.join(directory, "lab.json")) as f:
            meta = json.load(f)
    except (OSError, ValueError) as e:
        raise ValueError(f"{directory}: not a netperfmeter-lab results directory ({e})") from None
    s = studymod.load(os.path.join(directory, "study.toml"), quick=bool(meta.get("quick")))
    return s.runtime, s.warmup


def study_rows(directory, tolerance, interval, length=None):
    """[row of convergence.csv] for every flow of every complete run with a per-flow vector; runs
    without one are named in the second list."""
    runtime, warmup = _study_times(directory)
    runs_dir = os.path.join(directory, "runs")
    rows, missing = [], []
    for entry in sorted(os.listdir(runs_dir)) if os.path.isdir(runs_dir) else []:
        base, _, rep = entry.rpartition("-r")
        run_dir = os.path.join(runs_dir, entry)
        if entry.startswith(".") or not rep.isdigit() or not os.path.isdir(run_dir):
            continue
        flows = sorted((d for d in os.listdir(run_dir) if d[:1] == "f" and d[1:].isdigit()), key=lambda d: int(d[1:]))
        found = False
        for flow in flows:
            vectors = sorted(glob.glob(os.path.join(run_dir, flow, "run-passive-*-*.vec*")))
            for vector in vectors:
                found = True
                s = settling(interval_goodput(vector, warmup, runtime, interval), interval, tolerance)
                within_run = s["settled_s"] is not None and s["settled_s"] <= s["measured_s"] / 2
                stream = os.path.basename(vector).split("-")[-1].split(".")[0]
                name = flow + (f".{stream}" if len(vectors) > 1 else "")
                rows.append({"run": base, "repetition": int(rep), "flow": name,
                             "measured_s": s["measured_s"], "final": s["final"] / 1e6, "settled_s": s["settled_s"],
                             "settled_within_run": within_run,
                             "within_length": "" if length is None or s["settled_s"] is None
                             else s["settled_s"] <= length})
        if not found:
            missing.append(entry)
    return rows, missing


def command(directory, tolerance_percent, interval, length, out=print):
    """netperfmeter-lab convergence: prints each run's settling time and per cell the longest,
    writes DIR/convergence.csv; returns the exit code (raises ValueError on bad input)."""
    if not 0 <= tolerance_percent < 100:
        raise ValueError(f"--tolerance {tolerance_percent:g}: a percentage from 0 to below 100 is needed")
    if not interval > 0:
        raise ValueError(f"--interval {interval:g}: seconds above 0 are needed")
    if length is not None and not length > 0:
        raise ValueError(f"--length {length:g}: seconds above 0 are needed")
    tolerance = tolerance_percent / 100
    rows, missing = study_rows(directory, tolerance, interval, length)
    if not rows:
        raise ValueError(f"{directory}: no run with a per-flow vector (a study records them with [netperfmeter] "
                         "active = [\"-vector=run.vec.bz2\"])" + (f"; runs without: {len(missing)}" if missing else ""))
    with open(os.path.join(directory, NAME), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS)
        w.writeheader()
        w.writerows(rows)
    out(f"running mean of each flow's goodput over {interval:g}-s intervals after the warm-up, within "
        f"+-{tolerance_percent:g} % of its final value from (s of measurement):")
    cells = {}
    for r in rows:
        cells.setdefault((r["run"], r["flow"]), []).append(r)
    for (run, flow), group in sorted(cells.items()):
        settled = [r["settled_s"] for r in group]
        worst = max(settled)
        measured = min(r["measured_s"] for r in group)
        finals = ", ".join(f"{r['final']:.4g}" for r in group)
        line = (f"  {run} {flow}: {', '.join(f'{s:g}' for s in settled)} (longest {worst:g} of {measured:g} s; final "
                f"{finals} Mbit/s)")
        if not all(r["settled_within_run"] for r in group):
            line += ": not settled within the runs (stable for less than their last half)"
        elif length is not None:
            line += (f": runs of {length:g} s settle" if worst <= length else
                     f": runs of {length:g} s do not settle (need {worst:g} s)")
        out(line)
    for entry in missing:
        out(f"  {entry}: no per-flow vector")
    out(f"  table: {os.path.join(directory, NAME)}")
    return 0
