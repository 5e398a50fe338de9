"""Interoperability with the reference NetPerfMeter (2.0.10), in both directions: the reference's
passive with our active and our passive with the reference's active, control over TCP, a
saturated bidirectional TCP flow, a rate-driven bidirectional UDP flow and an MPTCP flow; every
result file complete on both sides and both processes exit 0.

Runs with a reference binary built outside this repository (dreibh/netperfmeter 2.0.10, see
tests/README.md), installed as /usr/local/lib/netperfmeter-reference-2.0.10/bin/netperfmeter or
named by NPM_REFERENCE_NETPERFMETER; otherwise it says so and skips."""

import os
import signal
import subprocess
import sys
import tempfile
import unittest

from harness import (FLOW_COLUMNS, MEASUREMENT_COLUMNS, NETPERFMETER, REFERENCE_INSTALLED, free_base_port, read_config,
                     read_scalars, read_vector, reference_netperfmeter, wait_for_port)

REFERENCE = reference_netperfmeter()
if not REFERENCE:
    print(f"SKIP: no reference netperfmeter binary (2.0.10): install one as {REFERENCE_INSTALLED} or set "
          "NPM_REFERENCE_NETPERFMETER to run the interoperability test")
    sys.exit(77)

FLOWS = ["-tcp", "const0:const1400:const0:const1400", "-udp", "const50:const500:const25:const1000",
         "-mptcp", "const10:const1000:const10:const1000"]


class Interop(unittest.TestCase):
    def run_pair(self, passive_binary, active_binary):
        port, (udp,) = free_base_port(udp_ports=1)
        # Ours gets a usrsctp UDP port of its own (the reference has no userland SCTP).
        own = [f"--sctp-udp-port={udp}"] if passive_binary == NETPERFMETER else []
        with tempfile.TemporaryDirectory() as d:
            log = open(os.path.join(d, "passive.log"), "w")
            passive = subprocess.Popen([passive_binary, str(port), "--nodisplay", *own], stdout=log,
                                       stderr=subprocess.STDOUT, cwd=d)
            try:
                wait_for_port(port + 1)
                active = subprocess.run([active_binary, f"127.0.0.1:{port}", "-y", "-runtime=3", "--nodisplay",
                                         "-config=run.config", "-scalar=run.sca.bz2", "-vector=run.vec.bz2", *FLOWS],
                                        cwd=d, capture_output=True, text=True, timeout=90)
            finally:
                passive.send_signal(signal.SIGINT)
                try:
                    passive.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    passive.kill()
                    passive.wait()
            self.assertEqual(active.returncode, 0, active.stdout[-2000:] + active.stderr[-2000:])
            self.assertNotIn("ERROR", active.stdout + active.stderr)
            config = read_config(os.path.join(d, "run.config"))
            self.assertEqual(config["NUM_FLOWS"], "3")
            for role in ("active", "passive"):
                scalars = read_scalars(os.path.join(d, f"run-{role}.sca.bz2"))
                for flow in (0, 1, 2):
                    self.assertGreater(scalars[(f"netPerfMeter.{role}.flow[{flow}]", "Received Bytes")], 0,
                                       f"{role} flow {flow}")
                self.assertGreater(len(read_vector(os.path.join(d, f"run-{role}.vec.bz2"), MEASUREMENT_COLUMNS)), 0)
                for flow in range(3):
                    name = config[f"FLOW{flow}_VECTOR_{role.upper()}_NODE"]
                    self.assertTrue(os.path.exists(os.path.join(d, name)), name)
                    self.assertGreater(len(read_vector(os.path.join(d, name), FLOW_COLUMNS)), 0, name)
            return active, sorted(os.listdir(d))

    def test_reference_passive_our_active(self):
        # Our active asks for per-path statistics (IDENTIFY flag 0x04, which the reference
        # ignores): it records its own per-path vectors and, as the reference acknowledges
        # REMOVE_FLOW with 0 (no per-path vector follows), expects none from the passive.
        active, files = self.run_pair(REFERENCE, NETPERFMETER)
        self.assertIn("run-paths-active-00000000-0000.vec.bz2", files)
        self.assertNotIn("run-paths-passive-00000000-0000.vec.bz2", files)
        self.assertIn("records no per-path vectors", active.stderr + active.stdout)

    def test_our_passive_reference_active(self):
        # The reference's active never asks for per-path statistics: our passive keeps to its
        # protocol (REMOVE_FLOW acknowledged with 0, one file per flow).
        active, files = self.run_pair(NETPERFMETER, REFERENCE)
        self.assertEqual([f for f in files if "paths" in f], [])


if __name__ == "__main__":
    unittest.main(verbosity=2)
