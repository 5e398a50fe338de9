#!/usr/bin/env python3
"""Benchmark: a saturated one-direction TCP flow on loopback, netperfmeter against iperf3 with
the same write size, alternating, several rounds. Prints goodput ratio netperfmeter/iperf3 and
CPU seconds per GB (both processes of each tool) per write size.

    tests/bench/throughput.py NETPERFMETER [--seconds 5] [--rounds 3] [--sizes 1400,16000] [--vectors]
                              [--reference REFERENCE_NETPERFMETER]

With --vectors, netperfmeter records per-message vectors on both sides (-vector=bench.vec.bz2);
iperf3 records nothing. Goodput is over the measurement (first to last reception); the vectors
are written after it, which the last column shows (seconds the run took beyond its runtime), and
their CPU time counts in CPU s/GB. Figures are medians over the rounds.

With --reference, the peer is the reference NetPerfMeter (2.0.10) instead of iperf3, on both
sides, with the same options (and vectors, if asked for).
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

from benchlib import cpu_seconds, passive_goodput, stop_servers, wait_port


def run_client(cmd, server_pid):
    """(result, CPU seconds of client and server, wall seconds of the client)."""
    before = cpu_seconds(server_pid)
    start = os.times()
    result = subprocess.run(cmd, capture_output=True, text=True)
    end = os.times()
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{result.stderr}")
    client_cpu = (end.children_user - start.children_user) + (end.children_system - start.children_system)
    return result, client_cpu + cpu_seconds(server_pid) - before, end.elapsed - start.elapsed


def netperfmeter_round(npm, port, size, seconds, workdir, server_pid, vectors):
    extra = ["-vector=bench.vec.bz2"] if vectors else []
    result, cpu, wall = run_client([npm, f"127.0.0.1:{port}", "-control-over-tcp", "-nodisplay", "-q",
                                    f"-runtime={seconds}", "-scalar=bench.sca", *extra, "-tcp", f"const0:const{size}"],
                                   server_pid)
    received, rate = passive_goodput(os.path.join(workdir, "bench-passive.sca"))
    # What the run took beyond its runtime: set-up, and with vectors writing them.
    return rate, cpu / (received / 1e9), wall - seconds


def iperf3_round(port, size, seconds, server_pid):
    result, cpu, _ = run_client(["iperf3", "-c", "127.0.0.1", "-p", str(port), "-l", str(size), "-t", str(seconds),
                              "-J"], server_pid)
    end = json.loads(result.stdout)["end"]
    received = end["sum_received"]["bytes"]
    return end["sum_received"]["bits_per_second"], cpu / (received / 1e9)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("netperfmeter")
    parser.add_argument("--seconds", type=float, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sizes", default="1400,16000")
    parser.add_argument("--port", type=int, default=23000)
    parser.add_argument("--vectors", action="store_true", help="netperfmeter records per-message vectors")
    parser.add_argument("--reference", help="the reference netperfmeter binary: the peer instead of iperf3")
    args = parser.parse_args()
    if not args.reference and not shutil.which("iperf3"):
        print("SKIP: iperf3 is not installed")
        return 77
    npm = os.path.abspath(args.netperfmeter)
    workdir = tempfile.mkdtemp(prefix="npm-bench-")
    os.chdir(workdir)
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    # A saturated flow records millions of rows per run: room for them beyond the per-session
    # default of the passive's spool limit (--max-spool, 2 GiB).
    spool = ["--max-spool=16384", "--max-spool-total=16384"] if args.vectors else []
    passive = subprocess.Popen([npm, str(args.port), "-nodisplay", "-q", *spool], **quiet)
    if args.reference:
        reference = os.path.abspath(args.reference)
        peer_name = "reference"
        peer = subprocess.Popen([reference, str(args.port + 10), "-nodisplay", "-q"], **quiet)
    else:
        peer_name = "iperf3"
        peer = subprocess.Popen(["iperf3", "-s", "-p", str(args.port + 10)], **quiet)
    try:
        wait_port(args.port + 1)
        wait_port(args.port + 11 if args.reference else args.port + 10)
        print(f"saturated TCP on loopback, {args.seconds:g} s per run, {args.rounds} rounds, alternating; "
              f"{os.cpu_count()} cores; netperfmeter {'with' if args.vectors else 'without'} vectors; medians")
        print(f"{'write':>6} {'netperfmeter Gbit/s':>20} {peer_name + ' Gbit/s':>16} {'ratio':>6} "
              f"{'npm CPU s/GB':>13} {peer_name + ' CPU s/GB':>18} {'npm after run s':>16}")
        for size in (int(s) for s in args.sizes.split(",")):
            npm_rates, peer_rates, npm_cpu, peer_cpu, npm_after = [], [], [], [], []
            for _ in range(args.rounds):
                rate, cpu, after = netperfmeter_round(npm, args.port, size, args.seconds, workdir, passive.pid,
                                                      args.vectors)
                npm_rates.append(rate)
                npm_cpu.append(cpu)
                npm_after.append(after)
                if args.reference:
                    rate, cpu, _ = netperfmeter_round(reference, args.port + 10, size, args.seconds, workdir,
                                                      peer.pid, args.vectors)
                else:
                    rate, cpu = iperf3_round(args.port + 10, size, args.seconds, peer.pid)
                peer_rates.append(rate)
                peer_cpu.append(cpu)
            a, b = statistics.median(npm_rates), statistics.median(peer_rates)
            print(f"{size:>6} {a / 1e9:>20.2f} {b / 1e9:>16.2f} {a / b:>6.2f} "
                  f"{statistics.median(npm_cpu):>13.3f} {statistics.median(peer_cpu):>18.3f} "
                  f"{statistics.median(npm_after):>16.1f}")
    finally:
        stop_servers([passive], [peer], workdir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
