"""Window traces of a study ([traces]): figures of traces, not of means.

A study with a [traces] table records the per-path vectors of one of its flows in every run
(netperfmeter -vector and --path-interval on the active), and after the runs the lab picks for
every cell (combination of the sweep) one representative run by a stated rule and plots its
per-path vectors with plot-netperfmeter-results --traces: per path the congestion window, what
is in flight, the SRTT, and the association's peer window and send buffer, sample by sample.

  [traces]
  metric = "goodput"          # the rule's metric (one of the study's [[metrics]])
  flow = 0                    # whose per-path vectors (a flow of the study; default 0)
  path_interval_ms = 10       # how often the active samples the paths (default 10)
  time_range = "10:11.5"      # the extract drawn, seconds since START (default: all)
  quantities = ["cwnd", ...]  # the panels (default: all the vectors hold)

The rule (representative()): among the cell's valid runs, the run whose metric is the median
of the cell's; with an even number of runs the lower of the two middle ones; equal values in
repetition order. Written next to the figures: DIR/traces/<cell>.pdf and DIR/traces.json (the
rule, and per cell every valid run's value and the run chosen).
"""

import json
import os
import re

from .runner import run_plotter

KEYS = {"metric", "flow", "path_interval_ms", "time_range", "quantities"}
QUANTITIES = ("cwnd", "unacked", "sent_acked", "rtt", "rwnd", "sendbuf", "recvqueue")
RULE = ("the valid run whose metric is the median of its cell's valid runs (with an even number of runs the "
        "lower of the two middle ones; equal values in repetition order)")
VECTOR = "run.vec.bz2"


class Traces:
    def __init__(self, metric, flow=0, path_interval_ms=10, time_range=None, quantities=None):
        self.metric, self.flow, self.path_interval_ms = metric, flow, path_interval_ms
        self.time_range, self.quantities = time_range, quantities

    def active_args(self):
        """What the active of every run gets so that its per-path vectors are recorded."""
        return [f"-vector={VECTOR}", f"--path-interval={self.path_interval_ms:g}"]


def parse(checker, study, data):
    """[traces] of a study file (study.traces: a Traces or None); adds the recording of the
    vectors to the active's arguments."""
    study.traces = None
    raw = data.get("traces")
    if raw is None:
        return
    if not isinstance(raw, dict):
        checker.fail("traces", "must be a table ([traces] with metric, flow, path_interval_ms, time_range, quantities)")
    for k in raw:
        if k not in KEYS:
            checker.fail(f"traces.{k}", f"unknown key (known: {', '.join(sorted(KEYS))})")
    names = [m.name for m in study.metrics]
    metric = raw.get("metric")
    if metric not in names:
        checker.fail("traces.metric", f"\"{metric}\" is not a metric of the study ({', '.join(names)}): the "
                     "representative run of each cell is its median run by this metric")
    flow = raw.get("flow", 0)
    if isinstance(flow, bool) or not isinstance(flow, int) or not 0 <= flow < len(study.flows):
        checker.fail("traces.flow", f"must be the number of a flow of the study (0 to {len(study.flows) - 1})")
    if str(study.flows[flow].get("protocol")) not in ("tcp", "mptcp", "sctp"):
        checker.fail("traces.flow", f"flow {flow} is {study.flows[flow].get('protocol')}: per-path vectors are "
                     "recorded for TCP, MPTCP and SCTP flows")
    interval = raw.get("path_interval_ms", 10)
    if isinstance(interval, bool) or not isinstance(interval, (int, float)) or not 1 <= interval <= 60000:
        checker.fail("traces.path_interval_ms", "must be 1 to 60000 milliseconds")
    time_range = raw.get("time_range")
    if time_range is not None:
        m = re.fullmatch(r"\s*([0-9.]*)\s*:\s*([0-9.]*)\s*", str(time_range)) if isinstance(time_range, str) else None
        try:
            ends = [float(x) if x else None for x in m.groups()] if m else None
        except ValueError:
            ends = None
        if ends is None or (None not in ends and ends[0] >= ends[1]):
            checker.fail("traces.time_range", f"\"{time_range}\" is not FROM:TO in seconds (FROM below TO; an end "
                         "may be left out)")
        if ends[1] is not None and ends[1] > study.runtime:
            checker.fail("traces.time_range", f"ends after the runtime ({study.runtime:g} s)")
    quantities = raw.get("quantities")
    if quantities is not None:
        if not isinstance(quantities, list) or not quantities or any(q not in QUANTITIES for q in quantities):
            checker.fail("traces.quantities", f"must be a list of {', '.join(QUANTITIES)}")
    study.traces = Traces(metric, flow, interval, time_range, quantities)
    study.active_args = list(study.active_args) + study.traces.active_args()


def representative(runs):
    """The representative of a cell's runs by RULE: runs is [(repetition, value)] of its valid
    runs; returns the repetition chosen, or None for no runs."""
    ordered = sorted(runs, key=lambda r: (r[1], r[0]))
    return ordered[(len(ordered) - 1) // 2][0] if ordered else None


def _cell_name(values):
    return "-".join(f"{k}={v}" for k, v in values.items()) or "run"


def plot(runner, valid):
    """Picks and plots the representative run of every cell of runner's study (valid(run_dir):
    whether a run counts); returns the PDFs written. No [traces]: nothing."""
    study = runner.study
    t = getattr(study, "traces", None)
    if t is None:
        return []
    cells = {}
    for values, rep, run_dir in runner.runs_done():
        if valid(run_dir):
            cells.setdefault(_cell_name(values), (values, []))[1].append((rep, run_dir))
    out_dir = os.path.join(runner.outdir, "traces")
    os.makedirs(out_dir, exist_ok=True)
    record = {"rule": RULE, "metric": t.metric, "flow": t.flow, "path_interval_ms": t.path_interval_ms,
              "time_range": t.time_range, "cells": {}}
    written = []
    for name, (values, runs) in sorted(cells.items()):
        measured = [(rep, runner.metrics_of(run_dir, values)[t.metric]) for rep, run_dir in runs]
        rep = representative(measured)
        run_dir = dict(runs)[rep]
        config = os.path.join(run_dir, f"f{t.flow}", "run.config")
        pdf = os.path.join(out_dir, f"{name}.pdf")
        chosen = dict(measured)[rep]
        title = (f"{study.name}: {', '.join(f'{k} = {v}' for k, v in values.items())}\nrun r{rep}, the median of "
                 f"{len(runs)} by {t.metric} ({chosen:.4g})")
        cmd = [runner.tools["plot-netperfmeter-results"], config, "--traces", "-o", pdf, "-q", f"--title={title}"]
        if t.time_range:
            cmd.append(f"--time-range={t.time_range}")
        if t.quantities:
            cmd.append(f"--quantities={','.join(t.quantities)}")
        run_plotter(cmd, f"{name} (--traces)")
        written.append(pdf)
        record["cells"][name] = {"values": values, "runs": {f"r{k}": v for k, v in sorted(measured)},
                                 "chosen": f"r{rep}", "value": chosen, "run": os.path.relpath(run_dir, runner.outdir),
                                 "figure": os.path.relpath(pdf, runner.outdir)}
    with open(os.path.join(runner.outdir, "traces.json"), "w") as f:
        json.dump(record, f, indent=1)
    return written
