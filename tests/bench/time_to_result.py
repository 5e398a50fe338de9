#!/usr/bin/env python3
"""Benchmark: how long after START a recorded run's results are all there. A saturated TCP flow of
1400-byte messages in both directions on loopback, recorded with per-message vectors on both
sides, for each vector format; several rounds, formats (and binaries) alternating.

    tests/bench/time_to_result.py NETPERFMETER [--baseline OTHER_NETPERFMETER] [--seconds 10]
                                  [--rounds 3] [--formats vec.bz2,vec.gz,vec]

Per binary and format it prints the medians of:
  * result/runtime: wall time from START (the active's "Starting measurement" line) to the end of
    the active, which has then written its own files and downloaded all of the passive's, as a
    multiple of the runtime;
  * after STOP: the seconds of that beyond the runtime;
  * CPU s/Mrow: CPU seconds of both processes (the whole run) per million vector rows (the
    messages both sides received, from their scalar files);
  * MB: the size of all vector files of the run.
With --baseline, the same for another build (e.g. the last release), alternating with the first:
the ratio of the medians says what changed.
"""

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

from benchlib import cpu_seconds, stop_servers, wait_port

SCALAR = re.compile(r'^scalar\s+"netPerfMeter\.(active|passive)\.flow\[0\]"\s+"Received Packets"\s+(\S+)')


def received_rows(workdir):
    """Messages received by both sides (= rows of their per-flow vectors), from the scalar files."""
    rows = 0
    for side in ("active", "passive"):
        with open(os.path.join(workdir, f"run-{side}.sca")) as f:
            for line in f:
                m = SCALAR.match(line)
                if m:
                    rows += int(float(m.group(2)))
    return rows


def one_round(npm, port, seconds, fmt, workdir, passive_pid):
    for name in os.listdir(workdir):
        if name.startswith("run"):
            os.unlink(os.path.join(workdir, name))
    cmd = [npm, f"127.0.0.1:{port}", "-control-over-tcp", "-nodisplay", f"-runtime={seconds}", "-scalar=run.sca",
           f"-vector=run.{fmt}", "-tcp", "const0:const1400:const0:const1400"]
    passive_before = cpu_seconds(passive_pid)
    times_before = os.times()
    proc = subprocess.Popen(cmd, cwd=workdir, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    started = None
    log = []
    while True:  # the log line by line, to see START as it happens
        line = proc.stderr.readline()
        if not line:
            break
        log.append(line)
        if started is None and "Starting measurement" in line:
            started = time.monotonic()
    proc.wait()
    ended = time.monotonic()
    times_after = os.times()
    if proc.returncode != 0 or started is None:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{''.join(log[-20:])}")
    active_cpu = (times_after.children_user - times_before.children_user) + \
                 (times_after.children_system - times_before.children_system)
    cpu = active_cpu + cpu_seconds(passive_pid) - passive_before
    rows = received_rows(workdir)
    megabytes = sum(os.path.getsize(os.path.join(workdir, n)) for n in os.listdir(workdir) if ".vec" in n) / 1e6
    return (ended - started) / seconds, ended - started - seconds, cpu / (rows / 1e6), megabytes, rows


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("netperfmeter")
    parser.add_argument("--baseline", help="another netperfmeter binary, measured alternately with the first")
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--formats", default="vec.bz2,vec.gz,vec",
                        help="vector file suffixes, comma-separated (default vec.bz2,vec.gz,vec)")
    args = parser.parse_args()
    binaries = [("this", os.path.abspath(args.netperfmeter))]
    if args.baseline:
        binaries.append(("baseline", os.path.abspath(args.baseline)))
    formats = args.formats.split(",")

    workdir = tempfile.mkdtemp(prefix="npm-ttr-")
    passives, port = {}, 47000
    try:
        for i, (name, npm) in enumerate(binaries):
            p = port + 10 * i
            passives[name] = (subprocess.Popen([npm, str(p), "-nodisplay", "-q"], cwd=workdir,
                                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL), p)
            wait_port(p + 1)
        results = {}
        for r in range(args.rounds):
            for fmt in formats:
                order = binaries if r % 2 == 0 else list(reversed(binaries))
                for name, npm in order:
                    proc, p = passives[name]
                    results.setdefault((name, fmt), []).append(
                        one_round(npm, p, args.seconds, fmt, workdir, proc.pid))
                    ratio, after, cpu, mb, rows = results[(name, fmt)][-1]
                    print(f"round {r + 1} {name:8s} {fmt:8s} result/runtime {ratio:5.2f}  after STOP {after:6.1f} s  "
                          f"{cpu:6.2f} CPU s/Mrow  {mb:8.1f} MB  {rows} rows", file=sys.stderr)
        print(f"# {args.seconds:g}-s saturated 1400-B TCP flow, both directions, per-message vectors on both sides; "
              f"medians of {args.rounds} rounds")
        print(f"{'binary':9s} {'format':8s} {'result/runtime':>14s} {'after STOP [s]':>14s} {'CPU s/Mrow':>10s} "
              f"{'MB':>8s} {'Mrows':>6s}")
        for (name, fmt), rounds in results.items():
            med = [statistics.median(x[i] for x in rounds) for i in range(5)]
            print(f"{name:9s} {fmt:8s} {med[0]:14.2f} {med[1]:14.1f} {med[2]:10.2f} {med[3]:8.1f} {med[4] / 1e6:6.2f}")
        if args.baseline:
            for fmt in formats:
                now = statistics.median(x[0] for x in results[("this", fmt)])
                then = statistics.median(x[0] for x in results[("baseline", fmt)])
                print(f"{fmt}: baseline/this time to result {then / now:.2f}x")
    finally:
        stop_servers([proc for proc, _ in passives.values()], [], workdir)


if __name__ == "__main__":
    main()
