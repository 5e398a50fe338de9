"""Many flows: the passive's flow limit as an option (and the active's one-line error when a run
exceeds it), thousands of rate-driven TCP flows with the limit raised, and the file-descriptor
limit (both sides raise their soft limit to the hard one; the active refuses a run that its hard
limit cannot hold, before connecting)."""

import os
import re
import resource
import shutil
import socket
import subprocess
import tempfile
import time
import unittest

from harness import (free_base_port, NETPERFMETER, Passive, main, read_scalars, run_active, settled, take_ports,
                     wait_for_port)

PORT, _ = free_base_port(span=42)  # this test's ports: PORT - 1 .. PORT + 43, its own
FLOW = "const10:const100"


def hard_limit():
    return resource.getrlimit(resource.RLIMIT_NOFILE)[1]


def error_lines(stderr):
    return [line for line in stderr.splitlines() if "ERROR" in line or "rror:" in line]


class ManyFlows(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="npm-many-")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def test_flows_beyond_max_flows_get_one_clear_line(self):
        with Passive(PORT, "-control-over-tcp", "--max-flows=40") as passive:
            result = run_active(f"127.0.0.1:{PORT}", "-control-over-tcp", "-runtime=1", "--count=41", "-tcp", FLOW,
                                cwd=self.dir, timeout=60, check=False)
            self.assertNotEqual(result.returncode, 0)
            errors = error_lines(result.stderr + result.stdout)
            self.assertEqual(len(errors), 1, result.stderr)
            self.assertIn("flow #40", errors[0])
            self.assertIn("40 accepted", errors[0])
            self.assertIn("--max-flows", errors[0])
            # The passive says it once, and goes on serving: 40 flows are within the limit.
            self.assertEqual(passive.output().count("(--max-flows)"), 1)
            run_active(f"127.0.0.1:{PORT}", "-control-over-tcp", "-runtime=0.5", "--count=40", "-tcp", FLOW,
                       cwd=self.dir, timeout=60)
            self.assertTrue(passive.alive())

    @unittest.skipIf(hard_limit() < 5000, "the hard limit of open files is below 5000")
    def test_more_flows_than_the_default_limit_with_the_limit_raised(self):
        flows = 4500  # beyond the default --max-flows (4096)
        with Passive(PORT + 10, "-control-over-tcp", f"--max-flows={flows}") as passive:
            begun = time.monotonic()
            run_active(f"127.0.0.1:{PORT + 10}", "-control-over-tcp", "-runtime=2", "-scalar=many.sca",
                       f"--count={flows}", "-tcp", FLOW, cwd=self.dir, timeout=180)
            took = time.monotonic() - begun
            scalars = read_scalars(os.path.join(self.dir, "many-passive.sca"))
            received = {obj: v for (obj, name), v in scalars.items()
                        if name == "Received Frames" and re.fullmatch(r"netPerfMeter\.passive\.flow\[\d+\]", obj)}
            self.assertEqual(len(received), flows)
            # Every flow sent frames throughout (10 per second for about 2 s).
            self.assertGreater(min(received.values()), 5, f"run took {took:.1f} s")
            self.assertNotIn("--max-flows", passive.output())
            self.assertNotIn("too many unidentified", passive.output())
            self.assertTrue(passive.alive())

    @unittest.skipUnless(shutil.which("prlimit"), "needs prlimit")
    def test_active_refuses_a_run_its_descriptor_limit_cannot_hold(self):
        with Passive(PORT + 20, "-control-over-tcp") as passive:
            cmd = ["prlimit", "--nofile=200:200", NETPERFMETER, f"127.0.0.1:{PORT + 20}", "-control-over-tcp",
                   "-nodisplay", "-runtime=1", "--count=300", "-tcp", FLOW]
            result = subprocess.run(cmd, cwd=self.dir, capture_output=True, text=True, timeout=60)
            self.assertNotEqual(result.returncode, 0)
            errors = error_lines(result.stderr + result.stdout)
            self.assertEqual(len(errors), 1, result.stderr)
            self.assertIn("300 flows need up to", errors[0])
            self.assertIn("only 200", errors[0])
            self.assertIn("ulimit", errors[0])
            # Refused before connecting.
            self.assertNotIn("Connecting to the passive", result.stderr + result.stdout)
            self.assertTrue(passive.alive())

    @unittest.skipUnless(shutil.which("prlimit"), "needs prlimit")
    def test_both_sides_raise_their_soft_limit_to_the_hard_one(self):
        # Soft limits of 100 hold neither side's 300 data connections; hard limits of 2000 do.
        passive_cmd = ["prlimit", "--nofile=100:2000", NETPERFMETER, str(PORT + 30), "-nodisplay", "-control-over-tcp",
                       f"--sctp-udp-port={take_ports(1, (socket.SOCK_DGRAM,))}"]
        log = tempfile.TemporaryFile()
        passive = subprocess.Popen(passive_cmd, stdout=subprocess.DEVNULL, stderr=log)
        try:
            wait_for_port(PORT + 31)
            cmd = ["prlimit", "--nofile=100:2000", NETPERFMETER, f"127.0.0.1:{PORT + 30}", "-control-over-tcp",
                   "-nodisplay", "-runtime=1", "-scalar=raised.sca", "--count=300", "-tcp", FLOW]
            result = subprocess.run(cmd, cwd=self.dir, capture_output=True, text=True, timeout=120)
            self.assertEqual(result.returncode, 0, result.stderr[-2000:])
            scalars = read_scalars(os.path.join(self.dir, "raised-passive.sca"))
            flows = [v for (obj, name), v in scalars.items() if name == "Received Frames" and ".flow[" in obj
                     and ".path[" not in obj]
            self.assertEqual(len(flows), 300)
            self.assertGreater(min(flows), 0)
            with open(f"/proc/{passive.pid}/limits") as f:
                limits = f.read()
            self.assertRegex(limits, r"Max open files\s+2000\s+2000")
            # A passive whose hard limit is below --max-flows says so.
            log.seek(0)
            self.assertIn("--max-flows=4096", log.read().decode(errors="replace"))
        finally:
            passive.terminate()
            passive.wait(timeout=10)
            log.close()

    @unittest.skipUnless(shutil.which("prlimit"), "needs prlimit")
    def test_passive_out_of_descriptors_refuses_add_flow_with_one_clear_line(self):
        # The passive may open 150 descriptors: 150 - 64 (reserve) = 86 flows, not 120.
        log = tempfile.TemporaryFile()
        passive = subprocess.Popen(["prlimit", "--nofile=150:150", NETPERFMETER, str(PORT + 40), "-nodisplay",
                                    "-control-over-tcp", f"--sctp-udp-port={take_ports(1, (socket.SOCK_DGRAM,))}"],
                                   stdout=subprocess.DEVNULL, stderr=log)
        try:
            wait_for_port(PORT + 41)
            result = run_active(f"127.0.0.1:{PORT + 40}", "-control-over-tcp", "-runtime=1", "--count=120", "-tcp",
                                FLOW, cwd=self.dir, timeout=60, check=False)
            self.assertNotEqual(result.returncode, 0)
            errors = error_lines(result.stderr + result.stdout)
            self.assertEqual(len(errors), 1, result.stderr[-2000:])
            self.assertIn("refused flow #86", errors[0])
            self.assertIn("may not open more file descriptors (86 flows accepted)", errors[0])
            self.assertIn("ulimit -Hn", errors[0])
            # Its flows are gone with the session (its descriptors settle): a run within the limit works.
            settled(lambda: len(os.listdir(f"/proc/{passive.pid}/fd")))
            run_active(f"127.0.0.1:{PORT + 40}", "-control-over-tcp", "-runtime=0.5", "--count=80", "-tcp", FLOW,
                       cwd=self.dir, timeout=60)
            self.assertIsNone(passive.poll())
            log.seek(0)
            text = log.read().decode(errors="replace")
            self.assertIn("--max-flows=4096 can connect", text)  # said at start
            self.assertEqual(text.count("flows use the file descriptors this process may open (150;"), 1)
        finally:
            passive.terminate()
            passive.wait(timeout=10)
            log.close()


if __name__ == "__main__":
    main()
