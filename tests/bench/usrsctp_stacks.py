#!/usr/bin/env python3
"""Benchmark: the bundled usrsctp (Debian's source with src/sctp/usrsctp-patches) against the
system's libusrsctp. Two netperfmeter binaries built alike but for -DNPM_USRSCTP; each measures
against a passive of its own build, alternating, several rounds:

  loopback  one saturated userland SCTP association on loopback (1400-byte messages): what the
            stack costs per byte when the CPU is the limit;
  cmt       a saturated CMT association (cmt=cmt, rtomin=200) over two 10 Mbit/s paths (the
            lab's disjoint topology: namespaces, veth, tbf on the routers): what CMT gets when
            the paths are the limit.

Prints the goodput medians, the ratio bundled/system and the CPU seconds per GB (both
processes). The bundled stack must not be slower (ratio >= 0.97, issue 26).

    usrsctp_stacks.py BUNDLED_NETPERFMETER SYSTEM_NETPERFMETER [--seconds 5] [--rounds 5]
                      [--cases loopback,cmt]

run-all.sh builds the system binary (build-usrsctp-system: -DNPM_USRSCTP=system, the netperfmeter
target only) beside the bundled one.
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile

from benchlib import cpu_seconds, passive_goodput, stop_servers

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
import harness  # noqa: E402  (ports from the harness's blocks, the lab's topology)


def stack_of(binary):
    """The stack a netperfmeter links, from its --version ("userland SCTP: bundled libusrsctp ...")."""
    out = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=10).stdout.splitlines()
    line = next((text for text in out if text.startswith("userland SCTP:")), "unknown")
    return line.removeprefix("userland SCTP:").strip()


class Side:
    """One binary with its passive (in the namespace `passive_ns`, or on loopback); its actives
    run in `active_ns` (or on loopback)."""

    def __init__(self, name, binary, workdir, passive_ns=None, active_ns=None):
        self.name, self.binary, self.active_ns = name, binary, active_ns
        self.port, (self.udp,) = harness.free_base_port(udp_ports=1)
        self.dir = os.path.join(workdir, name)
        os.makedirs(self.dir)
        cmd = [binary, str(self.port), "-nodisplay", "--sctp-stack=userland", f"--sctp-udp-port={self.udp}"]
        self.log = open(os.path.join(self.dir, "passive.log"), "w")
        self.passive = subprocess.Popen(in_netns(passive_ns, cmd), cwd=self.dir, stdout=subprocess.DEVNULL,
                                        stderr=self.log)
        harness.wait_for_text(lambda: open(self.log.name).read(), "waiting for incoming connections", proc=self.passive)

    def round(self, target, spec, seconds, local=None):
        """(goodput bit/s, CPU s per GB of both processes) of one run."""
        cmd = [self.binary, f"{target}:{self.port}", "-control-over-tcp", "-nodisplay", "-q", f"-runtime={seconds}",
               "-scalar=bench.sca", "--sctp-stack=userland", f"--sctp-remote-udp-port={self.udp}"]
        if local:
            cmd += ["-L", ",".join(local)]
        cmd += ["-sctp", spec]
        before, start = cpu_seconds(self.passive.pid), os.times()
        result = subprocess.run(in_netns(self.active_ns, cmd), cwd=self.dir, capture_output=True, text=True,
                                timeout=seconds + 120)
        end = os.times()
        if result.returncode != 0:
            raise SystemExit(f"{self.name}: {' '.join(cmd)} failed:\n{result.stderr}")
        cpu = (end.children_user - start.children_user) + (end.children_system - start.children_system) + \
            cpu_seconds(self.passive.pid) - before
        received, rate = passive_goodput(os.path.join(self.dir, "bench-passive.sca"))
        return rate, cpu / (received / 1e9)


def in_netns(netns, cmd):
    return ["ip", "netns", "exec", netns, *cmd] if netns else cmd


def measure(case, sides, seconds, rounds, target, spec, local=None):
    rates = {s.name: [] for s in sides}
    cpus = {s.name: [] for s in sides}
    for r in range(rounds):
        for side in (sides if r % 2 == 0 else sides[::-1]):  # alternating, and who goes first too
            rate, cpu = side.round(target, spec, seconds, local)
            rates[side.name].append(rate)
            cpus[side.name].append(cpu)
    b, s = (statistics.median(rates[n]) for n in ("bundled", "system"))
    print(f"{case:>9} {b / 1e6:>16.2f} {s / 1e6:>15.2f} {b / s:>6.3f} "
          f"{statistics.median(cpus['bundled']):>16.2f} {statistics.median(cpus['system']):>15.2f}   "
          f"(rounds: bundled {' '.join(f'{x / 1e6:.1f}' for x in rates['bundled'])}; "
          f"system {' '.join(f'{x / 1e6:.1f}' for x in rates['system'])})")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("bundled")
    parser.add_argument("system")
    parser.add_argument("--seconds", type=float, default=5)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--cases", default="loopback,cmt")
    args = parser.parse_args()
    binaries = {"bundled": os.path.abspath(args.bundled), "system": os.path.abspath(args.system)}
    stacks = {name: stack_of(b) for name, b in binaries.items()}
    for name, stack in stacks.items():
        if not stack.startswith(name):
            raise SystemExit(f"{binaries[name]} links {stack!r}, not the {name} usrsctp")
    print(f"bundled: {stacks['bundled']}\nsystem:  {stacks['system']}")
    print(f"{args.seconds:g} s per run, {args.rounds} rounds, alternating; {os.cpu_count()} cores; medians")
    print(f"{'case':>9} {'bundled Mbit/s':>16} {'system Mbit/s':>15} {'ratio':>6} "
          f"{'bundled CPU s/GB':>16} {'system CPU s/GB':>15}")
    cases = args.cases.split(",")
    if "loopback" in cases:
        workdir = tempfile.mkdtemp(prefix="npm-bench-usrsctp-")
        sides = [Side(name, b, workdir) for name, b in binaries.items()]
        try:
            measure("loopback", sides, args.seconds, args.rounds, "127.0.0.1", "const0:const1400")
        finally:
            stop_servers([s.passive for s in sides], [], workdir)
    if "cmt" in cases:
        if os.geteuid() != 0:
            print("      cmt: SKIP (namespaces need root)")
            return 0
        topology = harness.lab_topology()
        topo = harness.two_paths(*(topology.path(rate="10mbit") for _ in range(2)), prefix="npmbus")
        workdir = tempfile.mkdtemp(prefix="npm-bench-usrsctp-")
        sides = []
        try:
            sides = [Side(name, b, workdir, passive_ns=topo.P, active_ns=topo.A) for name, b in binaries.items()]
            measure("cmt", sides, args.seconds, args.rounds, topo.address("passive", 0),
                    "const0:const1400:cmt=cmt:rtomin=200", local=topo.active_addresses())
        finally:
            stop_servers([s.passive for s in sides], [], workdir)
            topo.down()
    return 0


if __name__ == "__main__":
    sys.exit(main())
