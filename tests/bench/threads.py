#!/usr/bin/env python3
"""Benchmark: network threads. Several saturated one-direction TCP flows on loopback with
--threads=1 and --threads=2 (both sides), alternating, several rounds; iperf3 -P with the same
number of streams as the peer measured in the same run. Prints the total goodput, its ratio to
one thread and to iperf3, and CPU seconds per GB (both processes of each tool), medians.

    tests/bench/threads.py NETPERFMETER [--flows 2,4] [--threads 1,2] [--seconds 5] [--rounds 3] [--size 1400]

Goodput is what the passive received over the measurement (first to last reception of any flow).
On a host with two cores the network threads share them with the other side and the kernel's
loopback work, so what a second thread gives here is a lower bound of what it gives on a host
where each side has cores of its own.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

from benchlib import passive_total, stop_servers, wait_port
from throughput import run_client


def netperfmeter_round(npm, port, flows, threads, size, seconds, workdir, server_pid):
    specs = []
    for _ in range(flows):
        specs += ["-tcp", f"const0:const{size}"]
    _, cpu, _ = run_client([npm, f"127.0.0.1:{port}", "-control-over-tcp", "-nodisplay", "-q", f"--threads={threads}",
                            f"-runtime={seconds}", "-scalar=bench.sca", *specs], server_pid)
    received, rate = passive_total(os.path.join(workdir, "bench-passive.sca"))
    return rate, cpu / (received / 1e9)


def iperf3_round(port, flows, size, seconds, server_pid):
    result, cpu, _ = run_client(["iperf3", "-c", "127.0.0.1", "-p", str(port), "-P", str(flows), "-l", str(size),
                                 "-t", str(seconds), "-J"], server_pid)
    end = json.loads(result.stdout)["end"]
    return end["sum_received"]["bits_per_second"], cpu / (end["sum_received"]["bytes"] / 1e9)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("netperfmeter")
    parser.add_argument("--flows", default="2,4")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--seconds", type=float, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--size", type=int, default=1400)
    parser.add_argument("--port", type=int, default=23100)
    args = parser.parse_args()
    if not shutil.which("iperf3"):
        print("SKIP: iperf3 is not installed")
        return 77
    npm = os.path.abspath(args.netperfmeter)
    thread_counts = [int(t) for t in args.threads.split(",")]
    workdir = tempfile.mkdtemp(prefix="npm-bench-threads-")
    os.chdir(workdir)
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    # One passive per thread count (ports 10 apart), started once.
    passives = {t: subprocess.Popen([npm, str(args.port + 10 * i), "-nodisplay", "-q", f"--threads={t}"], **quiet)
                for i, t in enumerate(thread_counts)}
    iperf_port = args.port + 10 * len(thread_counts)
    iperf = subprocess.Popen(["iperf3", "-s", "-p", str(iperf_port)], **quiet)
    try:
        for i in range(len(thread_counts)):
            wait_port(args.port + 10 * i + 1)
        wait_port(iperf_port)
        print(f"saturated TCP flows on loopback, {args.size} B writes, {args.seconds:g} s per run, "
              f"{args.rounds} rounds, alternating; {os.cpu_count()} cores; no vectors; medians")
        print(f"{'flows':>5} {'threads':>7} {'total Gbit/s':>13} {'vs 1 thread':>12} {'vs iperf3':>10} "
              f"{'CPU s/GB':>9} | {'iperf3 -P Gbit/s':>17} {'iperf3 CPU s/GB':>16}")
        for flows in (int(f) for f in args.flows.split(",")):
            rates = {t: [] for t in thread_counts}
            cpus = {t: [] for t in thread_counts}
            iperf_rates, iperf_cpus = [], []
            for _ in range(args.rounds):
                for i, t in enumerate(thread_counts):
                    rate, cpu = netperfmeter_round(npm, args.port + 10 * i, flows, t, args.size, args.seconds, workdir,
                                                   passives[t].pid)
                    rates[t].append(rate)
                    cpus[t].append(cpu)
                rate, cpu = iperf3_round(iperf_port, flows, args.size, args.seconds, iperf.pid)
                iperf_rates.append(rate)
                iperf_cpus.append(cpu)
            base = statistics.median(rates[thread_counts[0]])
            peer = statistics.median(iperf_rates)
            for t in thread_counts:
                r = statistics.median(rates[t])
                print(f"{flows:>5} {t:>7} {r / 1e9:>13.2f} {r / base:>12.2f} {r / peer:>10.2f} "
                      f"{statistics.median(cpus[t]):>9.3f} | {peer / 1e9:>17.2f} "
                      f"{statistics.median(iperf_cpus):>16.3f}")
    finally:
        stop_servers(list(passives.values()), [iperf], workdir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
