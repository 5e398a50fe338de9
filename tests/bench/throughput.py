#!/usr/bin/env python3
"""Benchmark: saturated one-direction TCP on loopback, netperfmeter against its peers with the
same write size and the same number of flows, alternating, several rounds: iperf3 (-P N) and
iperf 2 (Debian's iperf, multi-threaded, -P N), or with --reference the reference NetPerfMeter.
Prints per write size and number of flows each tool's goodput (median and range), the ratio of
netperfmeter's median to each peer's, and CPU seconds per GB (both processes of each tool).

    tests/bench/throughput.py NETPERFMETER [--seconds 5] [--rounds 5] [--sizes 1400,16000,131072]
                              [--flows 1,2] [--peers iperf3,iperf2] [--vectors]
                              [--reference REFERENCE_NETPERFMETER]

Goodput: netperfmeter's is what its passive received over the measurement (first to last
reception of any flow); iperf3's what its server received (sum_received); iperf 2's what its
client wrote over its own interval (its report: -y C), which exceeds what arrived by at most the
socket buffers (a few MB against the tens of GB of a run). In every round each tool runs once,
in the same order: machines drift, and a peer measured an hour apart says little.

With --vectors, netperfmeter records per-message vectors on both sides (-vector=bench.vec.bz2)
and the peers record nothing; the last column says how long writing them took after the run,
and their CPU time counts in CPU s/GB. With --reference, the reference NetPerfMeter (2.0.10) is
measured too, on both sides, with the same options (and vectors, if asked for).
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

from benchlib import cpu_seconds, passive_total, stop_servers, wait_port


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


def netperfmeter_round(npm, port, size, flows, seconds, workdir, server_pid, vectors):
    """(bit/s, CPU s per GB, seconds beyond the runtime) of one run of `flows` saturated flows."""
    extra = ["-vector=bench.vec.bz2"] if vectors else []
    specs = []
    for _ in range(flows):
        specs += ["-tcp", f"const0:const{size}"]
    _, cpu, wall = run_client([npm, f"127.0.0.1:{port}", "-control-over-tcp", "-nodisplay", "-q",
                               f"-runtime={seconds}", "-scalar=bench.sca", *extra, *specs], server_pid)
    received, rate = passive_total(os.path.join(workdir, "bench-passive.sca"))
    # What the run took beyond its runtime: set-up, and with vectors writing them.
    return rate, cpu / (received / 1e9), wall - seconds


def iperf3_round(port, size, flows, seconds, server_pid):
    result, cpu, _ = run_client(["iperf3", "-c", "127.0.0.1", "-p", str(port), "-P", str(flows), "-l", str(size),
                                 "-t", f"{seconds:g}", "-J"], server_pid)
    end = json.loads(result.stdout)["end"]
    received = end["sum_received"]["bytes"]
    return end["sum_received"]["bits_per_second"], cpu / (received / 1e9), None


def iperf2_round(port, size, flows, seconds, server_pid):
    result, cpu, _ = run_client(["iperf", "-c", "127.0.0.1", "-p", str(port), "-P", str(flows), "-l", str(size),
                                 "-t", f"{seconds:g}", "-y", "C"], server_pid)
    # One CSV line per connection: ..., id, interval, bytes, bits per second (2.1.8 prints no
    # sum line in this format); a line of id -1 would be a sum, left out.
    rows = [line.split(",") for line in result.stdout.splitlines() if line.count(",") >= 8]
    rows = [r for r in rows if r[5] != "-1"]
    if len(rows) != flows:
        raise SystemExit(f"iperf: {len(rows)} report lines for {flows} flows:\n{result.stdout}")
    sent = sum(float(r[7]) for r in rows)
    return sum(float(r[8]) for r in rows), cpu / (sent / 1e9), None


def spread(values):
    """'median (min-max)' in Gbit/s."""
    return f"{statistics.median(values) / 1e9:.2f} ({min(values) / 1e9:.1f}-{max(values) / 1e9:.1f})"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("netperfmeter")
    parser.add_argument("--seconds", type=int, default=5, help="per run, whole seconds (iperf3 -t takes no fraction)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--sizes", default="1400,16000,131072")
    parser.add_argument("--flows", default="1", help="numbers of flows per run (iperf -P), e.g. 1,2")
    parser.add_argument("--peers", default="iperf3,iperf2", help="of iperf3, iperf2 (the installed ones)")
    parser.add_argument("--port", type=int, default=23000)
    parser.add_argument("--vectors", action="store_true", help="netperfmeter records per-message vectors")
    parser.add_argument("--reference", help="the reference netperfmeter binary: measured as a peer too")
    args = parser.parse_args()
    if args.seconds < 1:
        parser.error("--seconds: 1 or more")
    programs = {"iperf3": "iperf3", "iperf2": "iperf"}
    wanted = [p for p in args.peers.split(",") if p]
    unknown = [p for p in wanted if p not in programs]
    if unknown:
        parser.error(f"--peers: unknown {', '.join(unknown)} (iperf3, iperf2)")
    peers = [p for p in wanted if shutil.which(programs[p])]
    for p in wanted:
        if p not in peers:
            print(f"note: {p} is not installed ({programs[p]}), not measured")
    if args.reference:
        peers.append("reference")
    if not peers:
        print("SKIP: no peer to measure against (iperf3, iperf, or --reference)")
        return 77
    npm = os.path.abspath(args.netperfmeter)
    workdir = tempfile.mkdtemp(prefix="npm-bench-")
    os.chdir(workdir)
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    # A saturated flow records millions of rows per run: room for them beyond the per-session
    # default of the passive's spool limit (--max-spool, 2 GiB).
    spool = ["--max-spool=16384", "--max-spool-total=16384"] if args.vectors else []
    passive = subprocess.Popen([npm, str(args.port), "-nodisplay", "-q", *spool], **quiet)
    reference = os.path.abspath(args.reference) if args.reference else None
    ports = {name: args.port + 10 * (i + 1) for i, name in enumerate(peers)}
    servers = {}
    for name, port in ports.items():
        cmd = ([reference, str(port), "-nodisplay", "-q"] if name == "reference"
               else [programs[name], "-s", "-p", str(port)])
        servers[name] = subprocess.Popen(cmd, **quiet)

    def peer_round(name, size, flows):
        port, pid = ports[name], servers[name].pid
        if name == "iperf3":
            return iperf3_round(port, size, flows, args.seconds, pid)
        if name == "iperf2":
            return iperf2_round(port, size, flows, args.seconds, pid)
        return netperfmeter_round(reference, port, size, flows, args.seconds, workdir, pid, args.vectors)
    try:
        wait_port(args.port + 1)
        for name in peers:
            wait_port(ports[name] + 1 if name == "reference" else ports[name])
        print(f"saturated TCP on loopback, {args.seconds:g} s per run, {args.rounds} rounds, alternating; "
              f"{os.cpu_count()} cores; netperfmeter {'with' if args.vectors else 'without'} vectors; "
              "Gbit/s as median (min-max)")
        head = f"{'write':>6} {'flows':>5} {'netperfmeter':>20}"
        for name in peers:
            head += f" {name:>20} {'ratio':>6}"
        head += f" {'CPU s/GB: npm':>14}" + "".join(f" {name:>9}" for name in peers)
        if args.vectors:
            head += f" {'npm after run s':>16}"
        print(head)
        for flows in (int(f) for f in args.flows.split(",")):
            for size in (int(s) for s in args.sizes.split(",")):
                rates = {name: [] for name in ["netperfmeter", *peers]}
                cpus = {name: [] for name in rates}
                after = []
                for _ in range(args.rounds):
                    rate, cpu, beyond = netperfmeter_round(npm, args.port, size, flows, args.seconds, workdir,
                                                           passive.pid, args.vectors)
                    rates["netperfmeter"].append(rate)
                    cpus["netperfmeter"].append(cpu)
                    after.append(beyond)
                    for name in peers:
                        rate, cpu, _ = peer_round(name, size, flows)
                        rates[name].append(rate)
                        cpus[name].append(cpu)
                ours = statistics.median(rates["netperfmeter"])
                line = f"{size:>6} {flows:>5} {spread(rates['netperfmeter']):>20}"
                for name in peers:
                    line += f" {spread(rates[name]):>20} {ours / statistics.median(rates[name]):>6.2f}"
                line += "".join(f" {statistics.median(cpus[name]):>{14 if name == 'netperfmeter' else 9}.3f}"
                                for name in rates)
                if args.vectors:
                    line += f" {statistics.median(after):>16.1f}"
                print(line, flush=True)
    finally:
        stop_servers([passive, *(servers[n] for n in peers if n == "reference")],
                     [servers[n] for n in peers if n != "reference"], workdir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
