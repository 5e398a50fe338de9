#!/usr/bin/env python3
"""Generates a large NetPerfMeter parameter study for benchmarking createsummary.

Writes DIR/run-NNNN/run-{active,passive}.sca.bz2 (about 300 scalars each, in the layout the
netperfmeter scalar writer produces: flows, totals, per-CPU and total CPU) and
DIR/results.summary in the style of run-experiment1.

usage: gen_parameter_study.py DIR [--runs N]   (N runs -> 2N files; default 300 -> 600 files)
"""
import argparse
import bz2
import os
import random

FLOW_NAMES = ["First Transmission", "Last Transmission", "First Reception", "Last Reception",
              "Transmitted Bytes", "Transmitted Packets", "Transmitted Frames",
              "Transmitted Bit Rate", "Transmitted Byte Rate", "Transmitted Packet Rate",
              "Transmitted Frame Rate", "Received Bytes", "Received Packets", "Received Frames",
              "Received Bit Rate", "Received Byte Rate", "Received Packet Rate",
              "Received Frame Rate"]
TOTAL_NAMES = ["First Statistics Event", "Last Statistics Event", "Transmitted Bytes",
               "Transmitted Packets", "Transmitted Frames", "Transmitted Byte Rate",
               "Transmitted Packet Rate", "Transmitted Frame Rate", "Received Bytes",
               "Received Packets", "Received Frames", "Received Byte Rate",
               "Received Packet Rate", "Received Frame Rate", "Lost Bytes", "Lost Packets",
               "Lost Frames", "Lost Byte Rate", "Lost Packet Rate", "Lost Frame Rate"]
CPU_NAMES = ["User", "Nice", "System", "Idle", "IOWait", "Hardware Interrupts",
             "Software Interrupts", "Hypervisor"]
FLOWS = 8
CPUS = 15


def value(name, rng, start):
    if "First" in name or "Last" in name:
        return "%d" % (start + rng.randrange(0, 30_000_000))
    if "Rate" in name:
        return "%1.6f" % rng.uniform(0, 1e9)
    return "%d" % rng.randrange(0, 10**10)


def scalar_file(role, rng, start):
    lines = []

    def add(obj, name, val):
        lines.append('scalar "netPerfMeter.%s.%s" "%s"%s%s\n'
                     % (role, obj, name, " " * max(1, 30 - len(name)), val))
    for flow in range(FLOWS):
        for name in FLOW_NAMES:
            add("flow[%d]" % flow, name, value(name, rng, start))
    for name in TOTAL_NAMES:
        add("total", name, value(name, rng, start))
    for cpu in range(1, CPUS + 1):
        for name in CPU_NAMES:
            add("CPU[%d]" % cpu, name, "%1.3f" % rng.uniform(0, 100))
    for name in CPU_NAMES:
        add("totalCPU", name, "%1.3f" % rng.uniform(0, 100))
    return "".join(lines)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("directory")
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    os.makedirs(args.directory, exist_ok=True)
    summary = ["--varnames=Timestamp Destination Protocol Flow Option1 Option2 Directory\n"]
    start = 1795272048342367
    for run in range(args.runs):
        directory = "run-%04d" % run
        os.makedirs(os.path.join(args.directory, directory), exist_ok=True)
        protocol = ("tcp", "udp")[run % 2]
        size = (1000, 1400, 4000)[(run // 2) % 3]
        values = "--values=%d 127.0.0.1 %s const0:const%d:const0:const%d %d %s %s\n" % (
            start, protocol, size, size, run % 7, "test%d" % (run % 3), directory)
        for role in ("active", "passive"):
            path = os.path.join(args.directory, directory, "run-%s.sca.bz2" % role)
            with open(path, "wb") as f:
                f.write(bz2.compress(scalar_file(role, rng, start).encode(), 9))
            summary.append(values)
            summary.append("--input=%s/run-%s.sca.bz2\n" % (directory, role))
        start += 31_000_000
    with open(os.path.join(args.directory, "results.summary"), "w") as f:
        f.writelines(summary)


if __name__ == "__main__":
    main()
