#!/usr/bin/env python3
"""Benchmark: what per-path sampling costs a saturated TCP flow on loopback. Alternating runs of
the same measurement (with per-flow vectors) with --path-interval=0 (no per-path vectors), 100
(the default) and 10 ms, on both sides; prints the median goodput and CPU seconds per GB of each
and the ratios against no sampling.

    tests/bench/path_sampling.py NETPERFMETER [--seconds 5] [--rounds 5] [--intervals 0,100,10]
"""

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile

from benchlib import cpu_seconds, passive_goodput, wait_port


def one_run(npm, port, seconds, interval, passive_pid):
    before = cpu_seconds(passive_pid)
    start = os.times()
    result = subprocess.run([npm, f"127.0.0.1:{port}", "-control-over-tcp", "-nodisplay", "-q",
                             f"-runtime={seconds}", "-scalar=bench.sca", "-vector=bench.vec",
                             f"--path-interval={interval}", "-tcp", "const0:const1400"],
                            capture_output=True, text=True)
    end = os.times()
    if result.returncode != 0:
        raise SystemExit(f"netperfmeter failed:\n{result.stderr}")
    cpu = (end.children_user - start.children_user) + (end.children_system - start.children_system)
    cpu += cpu_seconds(passive_pid) - before
    received, rate = passive_goodput("bench-passive.sca")
    sampled = os.path.exists("bench-paths-passive-00000000-0000.vec")
    if sampled != (interval > 0):
        raise SystemExit(f"--path-interval={interval}: per-path vector {'present' if sampled else 'missing'}")
    for name in os.listdir("."):
        os.remove(name)
    return rate, cpu / (received / 1e9)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("netperfmeter")
    parser.add_argument("--seconds", type=float, default=5)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--intervals", default="0,100,10")
    parser.add_argument("--port", type=int, default=23100)
    args = parser.parse_args()
    npm = os.path.abspath(args.netperfmeter)
    intervals = [int(i) for i in args.intervals.split(",")]
    workdir = tempfile.mkdtemp(prefix="npm-bench-paths-")
    os.chdir(workdir)
    passive = subprocess.Popen([npm, str(args.port), "-nodisplay", "-q"], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    try:
        wait_port(args.port + 1)
        rates = {i: [] for i in intervals}
        cpus = {i: [] for i in intervals}
        for _ in range(args.rounds):
            for i in intervals:  # alternating
                rate, cpu = one_run(npm, args.port, args.seconds, i, passive.pid)
                rates[i].append(rate)
                cpus[i].append(cpu)
        base = statistics.median(rates[intervals[0]])
        base_cpu = statistics.median(cpus[intervals[0]])
        print(f"saturated TCP on loopback with per-flow vectors, {args.seconds:g} s per run, {args.rounds} rounds "
              f"alternating, medians; {os.cpu_count()} cores")
        print(f"{'--path-interval':>16} {'Gbit/s':>8} {'ratio':>6} {'CPU s/GB':>9} {'ratio':>6}")
        for i in intervals:
            r, c = statistics.median(rates[i]), statistics.median(cpus[i])
            print(f"{i:>13} ms {r / 1e9:>8.2f} {r / base:>6.3f} {c:>9.3f} {c / base_cpu:>6.3f}")
    finally:
        passive.send_signal(signal.SIGINT)
        passive.wait()
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
