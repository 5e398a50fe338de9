"""The run-length check (npmlab/convergence.py, netperfmeter-lab convergence): running means and
settling times of synthetic series worked out by hand, the per-interval goodput of a synthetic
per-flow vector, and the command on a synthetic results directory (its table, its verdict per
cell, its one-line errors). No root, no network.

usage: test_convergence.py LAB_PROGRAM LAB_SOURCE_DIR
"""

import csv
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

LAB, LAB_SRC = sys.argv[1:3]
del sys.argv[1:3]
sys.path.insert(0, LAB_SRC)
from npmlab import convergence  # noqa: E402

STUDY = """name = "conv"
runtime = 45
warmup = 5
repetitions = 2
[sweep]
cmt = ["cmt", "cmtrpv1"]
[netperfmeter]
active = ["-vector=run.vec.bz2"]
[[paths]]
rate = "10mbit"
delay_ms = 1
[[flows]]
protocol = "sctp"
spec = "const0:const1444:cmt={cmt}"
[[metrics]]
name = "goodput"
value = "goodput(0) / 1e6"
"""


def write_vector(path, rates, step=0.25):
    """A per-flow vector whose flow receives at rates[k] bit/s in second k (a row every step s)."""
    with open(path, "w") as f:
        f.write("AbsTime\tRelTime\tSeqNumber\tAbsBytes\tAbsPackets\tAbsFrames\tRelBytes\tRelPackets\tRelFrames\n")
        total, line, t = 0.0, 1, 0.0
        while t < len(rates) - 1e-9:
            t = round(t + step, 6)
            total += rates[min(int((t - 1e-9) // 1), len(rates) - 1)] * step / 8
            f.write(f"{line:06d}\t{int(1.7e15 + t * 1e6)}\t{t:.6f}\t{line}\t{int(total)}\t{line}\t{line}\t0\t1\t1\n")
            line += 1


class Series(unittest.TestCase):
    def test_running_means(self):
        self.assertEqual(convergence.running_means([2, 4, 6, 8]), [2, 3, 4, 5])
        self.assertEqual(convergence.running_means([]), [])

    def test_a_constant_series_settles_at_once(self):
        s = convergence.settling([10.0] * 30, 1.0, 0.02)
        self.assertEqual((s["final"], s["settled_s"], s["measured_s"]), (10.0, 1.0, 30.0))

    def test_a_slow_start_worked_out_by_hand(self):
        # 20 in the first interval, then 10: running mean after k intervals (10k + 10) / k = 10 +
        # 10/k; over 100 intervals the final value is 10.1, its 2 % band [9.898, 10.302]: 10 + 10/k
        # <= 10.302 from k = 34 (10.294) on (k = 33: 10.303)
        s = convergence.settling([20.0] + [10.0] * 99, 1.0, 0.02)
        self.assertAlmostEqual(s["final"], 10.1)
        self.assertEqual(s["settled_s"], 34.0)
        # with 0.5-s intervals the same count of intervals is half the time
        self.assertEqual(convergence.settling([20.0] + [10.0] * 99, 0.5, 0.02)["settled_s"], 17.0)
        # a wider band settles sooner: 10 % of 10.1 = 1.01, 10/k <= 1.11 from k = 10 on (k = 9: 1.111)
        self.assertEqual(convergence.settling([20.0] + [10.0] * 99, 1.0, 0.10)["settled_s"], 10.0)

    def test_a_late_change_leaves_the_run_unsettled(self):
        # 10 for 25 intervals, then 5: the running mean leaves any band of the final value late
        s = convergence.settling([10.0] * 25 + [5.0] * 5, 1.0, 0.02)
        self.assertGreater(s["settled_s"], s["measured_s"] / 2)
        # a recovering outlier early on does not
        s = convergence.settling([0.0] + [10.0] * 299, 1.0, 0.02)
        self.assertLess(s["settled_s"], 60)

    def test_bad_input(self):
        for interval, tolerance in ((0, 0.02), (1, -0.1)):
            with self.assertRaises(ValueError):
                convergence.settling([1.0], interval, tolerance)
        s = convergence.settling([], 1.0, 0.02)
        self.assertIsNone(s["settled_s"])


class Vectors(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="npmlab-convergence-")
        self.addCleanup(shutil.rmtree, self.dir, ignore_errors=True)

    def test_interval_goodput_of_a_vector(self):
        path = os.path.join(self.dir, "run-passive-00000000-0000.vec")
        write_vector(path, [8e6] * 5 + [4e6] * 5)
        got = convergence.interval_goodput(path, 2.0, 10.0, 1.0)
        self.assertEqual(len(got), 8)
        for value, want in zip(got, [8e6] * 3 + [4e6] * 5):
            self.assertAlmostEqual(value, want, delta=want * 1e-5)
        self.assertEqual(len(convergence.interval_goodput(path, 2.0, 10.0, 3.0)), 2)  # the last part left out
        bad = os.path.join(self.dir, "bad.vec")
        with open(bad, "w") as f:
            f.write("Time\tBytes\n1\t2\n")
        with self.assertRaises(ValueError):
            convergence.interval_goodput(bad, 0, 1, 1)

    def results(self, rates_by_run):
        """A results directory of the study above with the given runs (label -> [rates per second])."""
        with open(os.path.join(self.dir, "study.toml"), "w") as f:
            f.write(STUDY)
        with open(os.path.join(self.dir, "lab.json"), "w") as f:
            json.dump({"quick": False, "seed": 1}, f)
        for name, rates in rates_by_run.items():
            flow = os.path.join(self.dir, "runs", name, "f0")
            os.makedirs(flow)
            if rates is not None:
                write_vector(os.path.join(flow, "run-passive-00000000-0000.vec"), rates)

    def lab(self, *args):
        return subprocess.run([sys.executable, LAB, "convergence", self.dir, *args], capture_output=True, text=True,
                              timeout=60)

    def test_the_command_on_a_results_directory(self):
        steady = [10e6] * 45
        slow = [10e6] * 5 + [14e6] * 10 + [10e6] * 30  # the warm-up, then 10 s high, then 10
        self.results({"cmt=cmt-r1": steady, "cmt=cmt-r2": steady, "cmt=cmtrpv1-r1": slow, "cmt=cmtrpv1-r2": slow,
                      "cmt=cmt-r3": None})
        r = self.lab("--length", "30")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("cmt=cmt f0: 1, 1 (longest 1 of 40 s", r.stdout)
        self.assertIn("runs of 30 s settle", r.stdout)
        # cmtrpv1: 14 for 10 s, then 10: final (140 + 300) / 40 = 11, its band [10.78, 11.22]; the
        # running mean after n >= 10 s is 10 + 40 / n, inside from n = 33 (11.21; n = 32: 11.25)
        # on: more than half of the 40 s measured, so not settled within the runs
        self.assertIn("cmt=cmtrpv1 f0: 33, 33 (longest 33 of 40 s", r.stdout)
        self.assertIn("not settled within the runs", r.stdout)
        self.assertIn("cmt=cmt-r3: no per-flow vector", r.stdout)
        with open(os.path.join(self.dir, "convergence.csv")) as f:
            rows = list(csv.DictReader(f))
        self.assertEqual(len(rows), 4)
        self.assertEqual({(x["run"], x["settled_s"], x["within_length"]) for x in rows},
                         {("cmt=cmt", "1.0", "True"), ("cmt=cmtrpv1", "33.0", "False")})
        # a wider band: the slow runs settle within their length
        r = self.lab("--tolerance", "10", "--length", "30")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertNotIn("not settled", r.stdout)

    def test_one_line_errors(self):
        self.results({"cmt=cmt-r1": None})
        r = self.lab()
        self.assertEqual(r.returncode, 1)
        self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
        self.assertIn("no run with a per-flow vector", r.stderr)
        for bad in (("--tolerance", "-1"), ("--interval", "0"), ("--length", "0")):
            r = self.lab(*bad)
            self.assertEqual(r.returncode, 1)
            self.assertIn(bad[0], r.stderr)
        r = subprocess.run([sys.executable, LAB, "convergence", os.path.join(self.dir, "none")], capture_output=True,
                           text=True, timeout=60)
        self.assertEqual(r.returncode, 1)
        self.assertIn("not a netperfmeter-lab results directory", r.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
