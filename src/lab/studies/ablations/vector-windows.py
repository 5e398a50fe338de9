#!/usr/bin/env python3
"""Goodput and per-path congestion windows of a lab study's runs in time windows.

Reads each run's recorded vectors (a study whose [netperfmeter] active arguments include
-vector=run.vec.bz2): the passive's per-flow vector of each flow (received bytes over time) and
the active's per-path vector of flow 0 (cwnd, RTT per peer address). Prints, per run, goodput of
every flow in each window and, per path of flow 0, the mean cwnd, its maximum, the share of
samples at or below 2 MTU and the mean RTT; then, per variant, means over the repetitions and the
run-by-run difference of each variant to the study's [compare] baseline.

  vector-windows.py RESULTS_DIR --windows 5-40,5-305 [--variable cmt]
"""
import argparse
import bisect
import bz2
import csv
import glob
import math
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from npmlab import stats  # noqa: E402  (the lab's own t-based intervals)


def rows(path):
    """Data rows of a vector file (header first; each row starts with its line number)."""
    with bz2.open(path, "rt") if path.endswith(".bz2") else open(path) as f:
        header = f.readline().rstrip("\n").split("\t")
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if len(parts) == len(header) + 1:
                parts = parts[1:]
            yield dict(zip(header, parts))


def goodput(path, windows):
    times, totals = [], []
    for r in rows(path):
        times.append(float(r["RelTime"]))
        totals.append(int(r["AbsBytes"]))

    def bytes_at(t):  # received bytes at time t (the last row at or before t)
        i = bisect.bisect_right(times, t)
        return totals[i - 1] if i else 0

    return [8 * (bytes_at(b) - bytes_at(a)) / (b - a) / 1e6 for a, b in windows]


def paths(path, windows):
    by_path = {}
    for r in rows(path):
        if r["Path"] == "-1" or r["Cwnd"] == "NA":
            continue
        by_path.setdefault(r["Remote"], []).append(
            (float(r["RelTime"]), float(r["Cwnd"]), float(r["MTU"]) if r["MTU"] != "NA" else 1500.0,
             float(r["RTT"]) if r["RTT"] != "NA" else math.nan))
    out = {}
    for remote, s in sorted(by_path.items()):
        out[remote] = []
        for a, b in windows:
            w = [x for x in s if a <= x[0] < b]
            if not w:
                out[remote].append(None)
                continue
            out[remote].append({"cwnd_mean": statistics.fmean(x[1] for x in w),
                                "cwnd_max": max(x[1] for x in w),
                                "at_most_2mtu": sum(x[1] <= 2 * x[2] for x in w) / len(w),
                                "rtt_ms": statistics.fmean(x[3] for x in w if not math.isnan(x[3]))})
    return out


def one(pattern):
    found = glob.glob(pattern)
    if len(found) != 1:
        raise ValueError(f"{pattern}: {len(found)} files (one expected)")
    return found[0]


def ci(values):
    """(mean, half-width of its 95 % interval)."""
    n, mean, low, high = stats.mean_ci(values)
    return mean, (high - low) / 2


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("results")
    ap.add_argument("--windows", default="5-40,5-305", help="A-B,... in seconds after the start")
    ap.add_argument("--variable", default="cmt", help="the compared variable (run directory key)")
    ap.add_argument("--baseline", default="cmt")
    args = ap.parse_args()
    windows = [tuple(float(x) for x in w.split("-")) for w in args.windows.split(",")]
    runs_dir = os.path.join(args.results, "runs")
    if not os.path.isdir(runs_dir):
        sys.exit(f"vector-windows: {runs_dir}: no such directory")
    results = {}
    for run in sorted(os.listdir(runs_dir)):
        d = os.path.join(runs_dir, run)
        keys = dict(kv.split("=", 1) for kv in run.rsplit("-r", 1)[0].split("-") if "=" in kv)
        rep = run.rsplit("-r", 1)[1]
        flows = sorted(f for f in os.listdir(d) if f.startswith("f") and f[1:].isdigit())
        try:
            # each flow keeps its number in the study (run-passive-FLOWID-STREAM.vec.bz2)
            g = {f: goodput(one(os.path.join(d, f, "run-passive-*-*.vec*")), windows) for f in flows}
            p = paths(one(os.path.join(d, "f0", "run-paths-active-*-*.vec*")), windows)
        except (OSError, ValueError) as e:
            print(f"vector-windows: {run}: {e}", file=sys.stderr)
            continue
        results[(keys.get(args.variable), rep)] = g
        print(f"{run}")
        for f in flows:
            print(f"  {f} goodput [Mbit/s]: " + ", ".join(f"{a:g}-{b:g} s {v:.2f}" for (a, b), v in zip(windows, g[f])))
        for remote, ws in p.items():
            for (a, b), w in zip(windows, ws):
                if w:
                    print(f"  f0 path {remote} {a:g}-{b:g} s: cwnd mean {w['cwnd_mean']:.0f} "
                          f"max {w['cwnd_max']:.0f} B, <= 2 MTU {100 * w['at_most_2mtu']:.0f} % of samples, "
                          f"RTT {w['rtt_ms']:.0f} ms")
    variants = sorted({v for v, _ in results})
    print("\nmeans over repetitions (95 % CI half-width) [Mbit/s]")
    writer = csv.writer(sys.stdout)
    for v in variants:
        for f in sorted({f for g in results.values() for f in g}):
            for i, (a, b) in enumerate(windows):
                vals = [g[f][i] for (vv, _), g in results.items() if vv == v and f in g]
                m, h = ci(vals)
                writer.writerow([f"{args.variable}={v}", f, f"{a:g}-{b:g}", f"{m:.2f}", f"{h:.2f}", len(vals)])
    print("\npaired against the baseline, flow f0 [Mbit/s]")
    for v in variants:
        if v == args.baseline:
            continue
        for i, (a, b) in enumerate(windows):
            diffs = [results[(v, r)]["f0"][i] - results[(args.baseline, r)]["f0"][i]
                     for (vv, r) in results if vv == v and (args.baseline, r) in results]
            if diffs:
                m, h = ci(diffs)
                print(f"  {v} - {args.baseline}, {a:g}-{b:g} s: {m:+.2f} [{m - h:+.2f}, {m + h:+.2f}] "
                      f"(n = {len(diffs)})")


if __name__ == "__main__":
    main()
