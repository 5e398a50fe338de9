"""The regime of a study against its paper's (npmlab/regime.py, [[regime]] rows, --dry-run), and
the statistics the lab's verdicts rest on (npmlab/stats.py). No root, no network.

usage: test_regime.py LAB_PROGRAM LAB_SOURCE_DIR
"""

import math
import os
import subprocess
import sys
import tempfile
import unittest

LAB, LAB_SRC = sys.argv[1:3]
del sys.argv[1:3]
sys.path.insert(0, LAB_SRC)
from npmlab import regime, study, topology  # noqa: E402

STUDIES = os.path.join(LAB_SRC, "studies")


def sctp(spec):
    return study.Flow("sctp", spec, "")


class Formulas(unittest.TestCase):
    """Each quantity on examples worked out by hand."""

    def test_a_bit_error_rate_as_a_packets_loss_probability(self):
        # the example: at 5e-6 bit errors a 1472-byte packet is lost with p = 5.7 %
        self.assertAlmostEqual(regime.packet_loss(5e-6, 1472), 1 - math.exp(1472 * 8 * math.log(1 - 5e-6)), 12)
        self.assertAlmostEqual(regime.packet_loss(5e-6, 1472), 0.0572, 4)
        self.assertEqual(regime.packet_loss(0, 1472), 0)
        self.assertAlmostEqual(regime.packet_loss(0, 1472, loss=0.01), 0.01, 12)
        # a 1444-byte message over SCTP in UDP: 1444 + 12 + 16 bytes are exposed
        path = topology.path(rate="10mbit", delay_ms=1, ber=5e-6)
        self.assertAlmostEqual(regime.flow_loss(sctp("const0:const1444:const0:const0"), path), 0.0572, 4)

    def test_mathis_bound(self):
        # 1444 bytes per 2 ms RTT at p = 5.72 %: 8 * 1444 / 0.002 * sqrt(1.5 / 0.0572) = 29.6 Mbit/s,
        # three times a 10 Mbit/s path (the "about 30 Mbit/s")
        bound = regime.mathis_bound(1444, 0.002, 0.0572)
        self.assertAlmostEqual(bound / 1e6, 5.776 * math.sqrt(1.5 / 0.0572), 2)
        self.assertTrue(29e6 < bound < 30e6)
        self.assertEqual(regime.mathis_bound(1444, 0.002, 0), math.inf)
        paths = [topology.path(rate="10mbit", delay_ms=1), topology.path(rate="10mbit", delay_ms=1, ber=5e-6)]
        flows = [sctp("const0:const1444:const0:const0")]
        self.assertAlmostEqual(regime.value("mathis_ratio", paths, None, flows, path=2), 2.96, 2)
        self.assertEqual(regime.value("mathis_ratio", paths, None, flows, path=1), math.inf)

    def test_queues(self):
        # the example: 80 packets at 0.5 Mbit/s hold 80 * 1514 * 8 / 0.5e6 = 1.94 s
        path = topology.path(rate="0.5mbit", delay_ms=1, queue=80 * study.FRAME_BYTES)
        self.assertAlmostEqual(regime.value("queue_ms", [path], None, [], path=1), 1937.92, 2)
        # against the bandwidth-delay product: 121,120 bytes against 0.5 Mbit/s * 2 ms = 125 bytes
        self.assertAlmostEqual(regime.value("queue_bdp", [path], None, [], path=1), 121120 / 125, 9)
        # RED: what a flow can fill is its max threshold (in full frames), not the limit beyond it
        red = topology.path(rate="10mbit", delay_ms=1, queue=200 * study.FRAME_BYTES, aqm="red",
                            aqm_params={"min": 20, "max": 80})
        self.assertEqual(regime.queue_bytes(red), 80 * study.FRAME_BYTES)

    def test_buffers_against_what_the_paths_hold(self):
        # 250,000 bytes against two paths of 10 Mbit/s * 20 ms (25,000 bytes) with 80-packet queues
        paths = [topology.path(rate="10mbit", delay_ms=10, queue=80 * study.FRAME_BYTES) for _ in range(2)]
        flows = [sctp("const0:const1444:const0:const0:sndbuf=250000:rcvbuf=125000")]
        self.assertAlmostEqual(regime.value("sndbuf_bdp", paths, None, flows), 250000 / (2 * (25000 + 121120)), 9)
        self.assertAlmostEqual(regime.value("rcvbuf_bdp", paths, None, flows), 125000 / (2 * (25000 + 121120)), 9)
        self.assertIsNone(regime.value("sndbuf_bdp", paths, None, [sctp("const0:const1444:const0:const0")]))

    def test_offered_load_at_frame_level(self):
        # the example: 1000-byte messages at 37.5/s cost 1070 bytes on the wire (321 kbit/s),
        # 500-byte UDP datagrams at 12.5/s 542 (54.2 kbit/s): 375.2 kbit/s against 300 + 50
        paths = [topology.path(rate="300kbit", delay_ms=40), topology.path(rate="50kbit", delay_ms=80)]
        flows = [sctp("const37.5:const1000:const0:const0"), study.Flow("udp", "const12.5:const500:const0:const0", "")]
        self.assertAlmostEqual(regime.value("load", paths, None, flows), (321000 + 54200) / 350000, 9)
        # saturated flows offer no load of their own
        self.assertIsNone(regime.value("load", paths, None, [sctp("const0:const1444:const0:const0")]))

    def test_mismatch(self):
        self.assertFalse(regime.mismatch(1.2, 1.0, 0.25))
        self.assertTrue(regime.mismatch(1.3, 1.0, 0.25))
        self.assertTrue(regime.mismatch(0.7, 1.0, 0.25))
        self.assertTrue(regime.mismatch(None, 1.0, 0.25))
        self.assertFalse(regime.mismatch(math.inf, math.inf, 0.25))
        self.assertTrue(regime.mismatch(2.0, math.inf, 0.25))


STUDY = """
name = "scaled"
runtime = 5
[sweep]
rho = [1, 10]
[[paths]]
rate = "{{rho}}mbit"
queue = "80p"
delay_ms = 1
[[flows]]
protocol = "sctp"
spec = "const0:const1444:const0:const0:sndbuf=250000"
[[metrics]]
name = "goodput"
value = "goodput(0)"
[[regime]]
quantity = "queue_ms"
path = 1
paper = "{paper}"
{extra}
"""


class StudyRows(unittest.TestCase):
    """[[regime]] rows in a study file, and netperfmeter-lab run --dry-run."""

    def write(self, paper="9.6", extra=""):
        d = tempfile.mkdtemp()
        path = os.path.join(d, "scaled.toml")
        with open(path, "w") as f:
            f.write(STUDY.format(paper=paper, extra=extra))
        return path

    def dry_run(self, path):
        return subprocess.run([LAB, "run", path, "--dry-run"], capture_output=True, text=True, timeout=60)

    def test_a_mismatch_without_a_reason_is_an_error(self):
        # 80 packets: 969 ms at 1 Mbit/s, 96.9 ms at 10; the paper's 9.6 ms matches neither
        r = self.dry_run(self.write())
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("queue_ms path 1: paper 9.6, study 969 (±25%): MISMATCH  [rho=1]", r.stdout)
        self.assertIn("regime: queue_ms path 1: the study's 969 against the paper's 9.6 (beyond 25%) at rho=1 and 1 "
                      "more point(s)", r.stderr)
        self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)

    def test_a_reason_excuses_a_mismatch_and_is_printed(self):
        r = self.dry_run(self.write(extra='reason = "time runs 10 times slower here"'))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("MISMATCH, reason: time runs 10 times slower here", r.stdout)

    def test_the_papers_value_as_a_formula_of_the_sweep(self):
        # the paper's queue at 10 rho: 80 * 1500 * 8 / (10 rho Mbit/s) = 96 / rho ms
        r = self.dry_run(self.write(paper="96 / {rho}", extra="tolerance = 0.05"))
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)  # 969 against 96 at rho = 1: a factor of 10
        self.assertIn("paper 96, study 969", r.stdout)
        r = self.dry_run(self.write(paper="969.28 / {rho}", extra="tolerance = 0.01"))
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("paper 969, study 969 (±1%): ok  [rho=1]", r.stdout)
        self.assertIn("paper 96.9, study 96.9 (±1%): ok  [rho=10]", r.stdout)

    def test_bad_rows_are_refused_by_line(self):
        for extra, message in (('reason = ""', "an empty reason excuses nothing"),
                               ("tolerance = -1", "must be a relative tolerance above 0"),
                               ("rho = 5", "\"5\" is not a value of the sweep's rho")):
            with self.assertRaises(study.StudyError) as e:
                study.load(self.write(extra=extra))
            self.assertIn(message, str(e.exception))
        with self.assertRaises(study.StudyError) as e:
            study.load(self.write(paper="96 / {nope}"))
        self.assertIn("{nope} is not a variable of the sweep", str(e.exception))
        text = STUDY.format(paper="1", extra="").replace('quantity = "queue_ms"\npath = 1', 'quantity = "queue_ms"')
        path = os.path.join(tempfile.mkdtemp(), "s.toml")
        with open(path, "w") as f:
            f.write(text)
        with self.assertRaises(study.StudyError) as e:
            study.load(path)
        self.assertRegex(str(e.exception), r"s\.toml:\d+: regime\[1\]\.path: queue_ms is a path's")

    def test_every_shipped_study_keeps_its_papers_regime_or_says_why(self):
        """Each shipped study that reproduces a paper states its regime, and its full and quick forms
        pass the check (a mismatch has a reason)."""
        for folder, _, files in os.walk(STUDIES):
            for name in sorted(files):
                if not name.endswith(".toml") or "ablations" in folder:
                    continue
                path = os.path.join(folder, name)
                for quick in (False, True):
                    s = study.load(path, quick=quick)
                    table = regime.regime_table(s)
                    self.assertTrue(table, f"{name}: no [[regime]] rows")
                    self.assertEqual(regime.errors(table), [], name)


if __name__ == "__main__":
    unittest.main(verbosity=2)
