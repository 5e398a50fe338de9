#!/usr/bin/env python3
"""Benchmark: many concurrent rate-driven TCP flows between one active and one passive on
loopback. Not a timed test: prints figures.

    tests/bench/many_flows.py NETPERFMETER [--flows 10000] [--seconds 10] [--rate 10] [--size 100]
                              [--port 26500] [--path-interval MS] [--threads N]

The passive is started with --max-flows=FLOWS (at least its default); the active with
--count=FLOWS -tcp constRATE:constSIZE. Printed:
  set-up     from the active's start to its "Starting measurement" line (log timestamps)
  stop       from its "Shutdown" line to its exit (results, REMOVE_FLOW, statistics, close)
  frames     per flow, the passive's received frames against RATE x the passive's scalar
             interval (START to STOP, which also holds the START acknowledgement and the
             stop), and the active's sent frames against RATE x runtime + 1 (the frame at the
             start): worst |deviation| and the median deviation, in percent, and how many flows
             are off by more than 1 %; then the frames sent but not received
  passive    the most file descriptors and the largest RSS seen while the active ran
Both processes raise their soft limit of open files to the hard limit themselves; the hard limit
of this shell must allow FLOWS + a few hundred descriptors (ulimit -Hn).
"""

import argparse
import datetime
import os
import re
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading

from benchlib import cpu_seconds, wait_port

STAMP = re.compile(r"^(\d{2}-\w{3}-\d{4} \d{2}:\d{2}:\d{2}\.\d+): (.*)$")


def log_times(path):
    """{first line starting with a key: its time} of a netperfmeter log (local time)."""
    keys = ("Starting measurement", "Shutdown", "Stopped measurement")
    found = {}
    with open(path, errors="replace") as f:
        for line in f:
            m = STAMP.match(line.rstrip("\n"))
            if not m:
                continue
            for k in keys:
                if m.group(2).startswith(k) and k not in found:
                    found[k] = datetime.datetime.strptime(m.group(1), "%d-%b-%Y %H:%M:%S.%f")
    return found


def frame_counts(scalar_file, role, counter):
    """(interval in s, {flow: its frames `counter`}) of one side's scalar file; the interval is the
    side's measurement (its first to last statistics event)."""
    frames, total = {}, {}
    flow = re.compile(rf'^scalar "netPerfMeter\.{role}\.flow\[(\d+)\]" "{counter} Frames"\s+(\S+)')
    tot = re.compile(rf'^scalar "netPerfMeter\.{role}\.total" "([^"]+)"\s+(\S+)')
    with open(scalar_file) as f:
        for line in f:
            m = flow.match(line)
            if m:
                frames[int(m.group(1))] = float(m.group(2))
                continue
            m = tot.match(line)
            if m:
                total[m.group(1)] = float(m.group(2))
    return (total["Last Statistics Event"] - total["First Statistics Event"]) / 1e6, frames


def deviations(frames, expected):
    """{flow: relative deviation of its frames from `expected`}"""
    return {k: (v - expected) / expected for k, v in frames.items()}


def describe(values):
    worst = max(values, key=abs)
    off = sum(1 for v in values if abs(v) > 0.01)
    return (f"{len(values)} flows, worst {100 * worst:+.2f} %, median {100 * statistics.median(values):+.2f} %, "
            f"{off} off by more than 1 %")


class Sampler(threading.Thread):
    """The most descriptors and the largest RSS (KiB) of a process, every 0.2 s."""

    def __init__(self, pid):
        super().__init__(daemon=True)
        self.pid, self.fds, self.rss = pid, 0, 0
        self.done = threading.Event()

    def run(self):
        while not self.done.wait(0.2):
            try:
                self.fds = max(self.fds, len(os.listdir(f"/proc/{self.pid}/fd")))
                with open(f"/proc/{self.pid}/status") as f:
                    for line in f:
                        if line.startswith("VmRSS:"):
                            self.rss = max(self.rss, int(line.split()[1]))
            except OSError:
                return


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("netperfmeter")
    parser.add_argument("--flows", type=int, default=10000)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--rate", type=float, default=10, help="frames per second of each flow")
    parser.add_argument("--size", type=int, default=100, help="bytes per frame")
    parser.add_argument("--port", type=int, default=26500)
    parser.add_argument("--path-interval", type=int, default=None,
                        help="--path-interval of the active (default: its own)")
    parser.add_argument("--threads", type=int, default=None, help="--threads of both sides (default: their own)")
    parser.add_argument("--keep", action="store_true", help="keep the working directory")
    args = parser.parse_args()

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < args.flows + 200:
        print(f"the hard limit of open files ({hard}) is too low for {args.flows} flows: "
              f"ulimit -Hn {args.flows + 1000}")
        return 1
    npm = os.path.abspath(args.netperfmeter)
    workdir = tempfile.mkdtemp(prefix="npm-many-flows-")
    rate = f"{args.rate:g}"
    passive_cmd = [npm, str(args.port), "-nodisplay", "-control-over-tcp", f"--max-flows={max(args.flows, 4096)}"]
    active_cmd = [npm, f"127.0.0.1:{args.port}", "-control-over-tcp", "-nodisplay", f"-runtime={args.seconds:g}",
                  "-scalar=many.sca", f"--count={args.flows}", "-tcp", f"const{rate}:const{args.size}"]
    if args.path_interval is not None:
        active_cmd.insert(-2, f"--path-interval={args.path_interval}")
    if args.threads is not None:
        passive_cmd.append(f"--threads={args.threads}")
        active_cmd.insert(-2, f"--threads={args.threads}")
    print("passive:", " ".join(passive_cmd))
    print("active: ", " ".join(active_cmd))
    with open(os.path.join(workdir, "passive.log"), "w") as plog:
        passive = subprocess.Popen(passive_cmd, cwd=workdir, stdout=plog, stderr=subprocess.STDOUT)
    try:
        wait_port(args.port + 1)
        sampler = Sampler(passive.pid)
        sampler.start()
        active_log = os.path.join(workdir, "active.log")
        passive_cpu = cpu_seconds(passive.pid)
        times_before = os.times()
        with open(active_log, "w") as alog:
            began = datetime.datetime.now()
            active = subprocess.Popen(active_cmd, cwd=workdir, stdout=alog, stderr=subprocess.STDOUT)
            code = active.wait(timeout=args.seconds + 600)
            ended = datetime.datetime.now()
        passive_cpu = cpu_seconds(passive.pid) - passive_cpu
        times_after = os.times()
        active_cpu = (times_after.children_user - times_before.children_user) + \
            (times_after.children_system - times_before.children_system)
        sampler.done.set()
        sampler.join()
        if code != 0:
            with open(active_log, errors="replace") as f:
                tail = [line for line in f if "ERROR" in line or "rror" in line][-5:]
            print(f"the active failed with exit code {code}:\n{''.join(tail)}")
            return 1
        times = log_times(active_log)
        setup = (times["Starting measurement"] - began).total_seconds()
        measured = (times["Shutdown"] - times["Starting measurement"]).total_seconds()
        stop = (ended - times["Shutdown"]).total_seconds()
        interval, received = frame_counts(os.path.join(workdir, "many-passive.sca"), "passive", "Received")
        sending, sent = frame_counts(os.path.join(workdir, "many-active.sca"), "active", "Transmitted")
        print(f"{args.flows} TCP flows of {rate} frames/s x {args.size} bytes, runtime {args.seconds:g} s, "
              f"{os.cpu_count()} cores")
        print(f"set-up {setup:.2f} s   measurement {measured:.2f} s   stop {stop:.2f} s   "
              f"(set-up + stop {setup + stop:.2f} s, whole run {(ended - began).total_seconds():.2f} s)")
        # The passive's interval runs from START to STOP and so also holds the time the
        # acknowledgement of START and the stop take; the active's is the time its flows send.
        print(f"passive frames per flow over its scalar interval {interval:.3f} s "
              f"({args.rate * interval:.1f} expected): "
              f"{describe(list(deviations(received, args.rate * interval).values()))}")
        # A flow sends its first frame at the start and then one per 1/RATE s until the runtime
        # ends; the active's interval also holds the stop (queues drained, STOP acknowledged).
        due = args.rate * args.seconds + 1
        print(f"active frames sent per flow against RATE x runtime + 1 ({due:g}; its scalar interval "
              f"{sending:.3f} s): {describe(list(deviations(sent, due).values()))}")
        lost = {k: sent[k] - received.get(k, 0) for k in sent}
        print(f"frames sent but not received: {sum(lost.values()):.0f} in {sum(1 for v in lost.values() if v)} flows")
        print(f"passive: at most {sampler.fds} file descriptors, {sampler.rss / 1024:.1f} MiB RSS; "
              f"CPU seconds: active {active_cpu:.2f}, passive {passive_cpu:.2f}; "
              f"load average {os.getloadavg()[0]:.2f}")
        return 0
    finally:
        if passive.poll() is None:
            passive.send_signal(signal.SIGINT)
            try:
                passive.wait(timeout=30)
            except subprocess.TimeoutExpired:
                passive.kill()
                passive.wait()
        if args.keep:
            print("kept", workdir)
        else:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
