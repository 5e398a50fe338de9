"""netperfmeter-lab preflight STUDY: what `run` checks before its first run, without running it.

A study on hosts: the hosts' pre-flight (hosts.HostsRunner.preflight: ssh, netperfmeter versions
and stacks, addresses, routes, clocks, free ports, the control ports over every path), nothing
written, nothing left on the hosts. A study on a namespace test bed: what `run` would refuse
before building it (the study's command lines through netperfmeter's own parser, root, iproute2,
tshark, the congestion controls, QUIC, the delay line where the kernel has no netem), each
problem found rather than only the first. One line per problem and exit 1, or one summary line
and exit 0."""

import os
import shutil
import subprocess
import sys
import tempfile

from . import resultsdb, testbed, topology
from .errors import LabError


def _collect(problems, check):
    try:
        check()
    except LabError as e:
        problems.append(str(e))


def _delay_line(tools):
    """Where the kernel has no netem, the delay line carries every path's delay and loss."""
    if topology.kernel_has_netem():
        return "netem"
    program = tools["netperfmeter-delayline"]
    try:
        r = subprocess.run([program, "--version"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise LabError(f"the kernel has no netem, and the delay line {program} does not run: {e}")
    if r.returncode != 0:
        raise LabError(f"the kernel has no netem, and the delay line {program} --version exits {r.returncode}")
    return "the delay line (no netem in this kernel)"


def check(study, tools, check_command_lines, check_root, program="netperfmeter-lab"):
    """Prints the problems (or the summary line); the exit status."""
    problems = []
    _collect(problems, lambda: resultsdb.check(study))
    _collect(problems, check_command_lines)
    bed = testbed.get(study.topology)
    if bed.remote:
        out = tempfile.mkdtemp(prefix="npmlab-preflight-")  # the runner's results directory: never written
        runner = bed.runner_class()(study, out, tools)
        try:
            _collect(problems, lambda: runner.check_quic(local_netperfmeter=False))
            problems += runner.preflight()
            summary = None if problems else runner.summary()
        finally:
            runner.close()
            shutil.rmtree(out, ignore_errors=True)
    else:
        runner = bed.runner_class()(study, os.devnull, tools)
        _collect(problems, check_root)
        _collect(problems, runner.check_capture)
        _collect(problems, runner.check_congestion_controls)
        _collect(problems, runner.check_quic)
        shaping = []
        if os.geteuid() == 0 and shutil.which("tc") and shutil.which("ip"):
            _collect(problems, lambda: shaping.append(_delay_line(tools)))
        summary = (f"netperfmeter ({tools.version('netperfmeter')}) accepts every command line; root, ip and tc; "
                   f"tshark; the congestion controls; delays and loss by {shaping[0] if shaping else 'netem'}")
    for problem in problems:
        print(f"{program}: {problem}", file=sys.stderr)
    if problems:
        print(f"{program}: {study.name}: {len(problems)} problem(s) (above): run would not start", file=sys.stderr)
        return 1
    print(f"{study.name}: preflight passed: {summary}")
    return 0
