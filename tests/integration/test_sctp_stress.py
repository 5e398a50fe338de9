"""Control over userland SCTP (-x), measurements in a row against one passive: every one
connects, measures three SCTP streams and collects its results. (Once one in eight such runs
timed out connecting; a stack that loses an INIT now and then shows here, and a passive that
corrupted its heap when associations ended died after 30 to 420 runs.) 60 runs in the gating
suite, NPM_STRESS_RUNS (1000 in the long tier: integration_sctp_stress_long) otherwise."""

import os
import statistics
import tempfile
import time
import unittest

from harness import free_base_port, Passive, run_active

PORT, _ = free_base_port(span=100)  # this test's ports: PORT - 1 .. PORT + 101, its own
UDP_PORT = PORT + 99  # its own SCTP/UDP encapsulation port: no other passive interferes
RUNS = int(os.environ.get("NPM_STRESS_RUNS", "60"))


class SequentialSctpControl(unittest.TestCase):
    def test_runs_in_a_row_without_a_failure(self):
        failures, durations = [], []
        with Passive(PORT, "--sctp-stack=userland", f"--sctp-udp-port={UDP_PORT}") as passive, \
                tempfile.TemporaryDirectory() as d:
            for run in range(RUNS):
                if not passive.alive():
                    # The remaining runs could only time out connecting (10 s each): stop here.
                    tail = passive.output().strip().splitlines()[-3:]
                    self.fail(f"the passive died (exit {passive.proc.returncode}) after {run} runs: {tail}\n"
                              f"{passive.crash_report()}")
                begin = time.monotonic()
                result = run_active(f"127.0.0.1:{PORT}", "-x", f"--sctp-remote-udp-port={UDP_PORT}", "-runtime=0.3",
                                    "-scalar=run.sca", "-sctp", "const0:const1400", "const10:const500",
                                    "const10:const200:unordered=1", cwd=d, timeout=60, check=False)
                durations.append(time.monotonic() - begin)
                if result.returncode != 0:
                    errors = [line for line in result.stderr.splitlines() if "ERROR" in line]
                    failures.append(f"run {run + 1}: exit {result.returncode}: {errors[:2]}")
            self.assertTrue(passive.alive())
        print(f"{RUNS} runs: median {statistics.median(durations):.2f} s, longest {max(durations):.2f} s, "
              f"{len(failures)} failed")
        self.assertEqual(failures, [])


if __name__ == "__main__":
    from harness import main
    main()
