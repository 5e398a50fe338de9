"""The window traces of a study (npmlab/traces.py, [traces]): the rule that picks a cell's
representative run, the table's checks, what the lab records and asks the plotter for. No root,
no network (the trace figures themselves: tests/rplot/e2e-traces.sh; the shipped trace studies'
quick forms: lab-studies).

usage: test_traces.py LAB_PROGRAM LAB_SOURCE_DIR
"""

import json
import os
import sys
import tempfile
import unittest

LAB, LAB_SRC = sys.argv[1:3]
del sys.argv[1:3]
sys.path.insert(0, LAB_SRC)
from npmlab import study, traces  # noqa: E402
from npmlab.topology import LabError  # noqa: E402

STUDIES = os.path.join(LAB_SRC, "studies")
SHIPPED = ("buffer-splitting-traces", "exclusive-paths-traces")


class Rule(unittest.TestCase):
    def test_the_median_run_of_an_odd_number(self):
        self.assertEqual(traces.representative([(1, 9.0), (2, 3.0), (3, 5.0)]), 3)
        self.assertEqual(traces.representative([(1, 1.0), (2, 7.0), (3, 2.0), (4, 9.0), (5, 8.0)]), 2)

    def test_the_lower_middle_run_of_an_even_number(self):
        self.assertEqual(traces.representative([(1, 4.0), (2, 1.0), (3, 3.0), (4, 2.0)]), 4)

    def test_equal_values_in_repetition_order(self):
        self.assertEqual(traces.representative([(3, 5.0), (1, 5.0), (2, 5.0)]), 2)
        self.assertEqual(traces.representative([(2, 5.0), (1, 5.0)]), 1)

    def test_one_run_and_none(self):
        self.assertEqual(traces.representative([(7, 0.3)]), 7)
        self.assertIsNone(traces.representative([]))

    def test_a_bimodal_cell_gives_a_run_of_the_mode_most_runs_are_in(self):
        # 3 of 5 runs collapsed: the median is a collapsed run, not a mean no run had
        self.assertEqual(traces.representative([(1, 9.8), (2, 0.4), (3, 9.9), (4, 0.5), (5, 0.6)]), 5)


def write_study(directory, traces_table, runtime=12):
    path = os.path.join(directory, "s.toml")
    with open(path, "w") as f:
        f.write(f"""name = "s"
runtime = {runtime}
[sweep]
x = [1, 2]
[[paths]]
rate = "10mbit"
delay_ms = 1
[[paths]]
rate = "10mbit"
delay_ms = 1
[[flows]]
protocol = "sctp"
spec = "const0:const1444:const0:const0:cmt=cmt"
[[flows]]
protocol = "udp"
spec = "const10:const100:const0:const0"
[[metrics]]
name = "goodput"
value = "goodput(0)"
[netperfmeter]
active = ["-quiet"]
{traces_table}
""")
    return path


class Table(unittest.TestCase):
    def test_the_shipped_trace_studies_record_the_per_path_vectors(self):
        for name in SHIPPED:
            for quick in (False, True):
                s = study.load(os.path.join(STUDIES, name + ".toml"), quick=quick)
                self.assertIsNotNone(s.traces, name)
                self.assertIn(s.traces.metric, [m.name for m in s.metrics])
                args = s.args_for("active", next(s.combinations()))
                self.assertIn("-vector=run.vec.bz2", args)
                self.assertIn("--path-interval=10", args)

    def test_a_table_and_the_options_it_adds(self):
        with tempfile.TemporaryDirectory() as d:
            s = study.load(write_study(d, '[traces]\nmetric = "goodput"\npath_interval_ms = 20\n'
                                          'time_range = "1:2.5"\nquantities = ["cwnd", "rwnd"]'))
            self.assertEqual((s.traces.flow, s.traces.path_interval_ms, s.traces.time_range, s.traces.quantities),
                             (0, 20, "1:2.5", ["cwnd", "rwnd"]))
            self.assertEqual(s.args_for("active", {"x": 1}), ["-quiet", "-vector=run.vec.bz2", "--path-interval=20"])
            s = study.load(write_study(d, ""))
            self.assertIsNone(s.traces)
            self.assertEqual(s.args_for("active", {"x": 1}), ["-quiet"])

    def test_bad_tables_name_the_key(self):
        cases = [('[traces]\nmetric = "rate"', "traces.metric"),
                 ('[traces]\nmetric = "goodput"\ncolour = 1', "traces.colour"),
                 ('[traces]\nmetric = "goodput"\nflow = 2', "traces.flow"),
                 ('[traces]\nmetric = "goodput"\nflow = 1', "per-path vectors are recorded for TCP, MPTCP and SCTP"),
                 ('[traces]\nmetric = "goodput"\npath_interval_ms = 0', "traces.path_interval_ms"),
                 ('[traces]\nmetric = "goodput"\ntime_range = "3:1"', "traces.time_range"),
                 ('[traces]\nmetric = "goodput"\ntime_range = "a:b"', "traces.time_range"),
                 ('[traces]\nmetric = "goodput"\ntime_range = "10:20"', "ends after the runtime"),
                 ('[traces]\nmetric = "goodput"\nquantities = ["flight"]', "traces.quantities"),
                 ('traces = 3', "traces")]
        with tempfile.TemporaryDirectory() as d:
            for table, wanted in cases:
                with self.assertRaises(study.StudyError, msg=table) as e:
                    study.load(write_study(d, table))
                self.assertIn(wanted, str(e.exception), table)


class FakeRunner:
    """What traces.plot() uses of a runner: the study, the results directory, the tools, the
    complete runs and each run's metrics."""

    def __init__(self, s, outdir, plotter, goodputs):
        self.study, self.outdir, self.tools = s, outdir, {"plot-netperfmeter-results": plotter}
        self.goodputs = goodputs
        self.runs = []
        for (x, rep), _ in sorted(goodputs.items()):
            run_dir = os.path.join(outdir, "runs", f"x={x}-r{rep}")
            os.makedirs(os.path.join(run_dir, "f0"))
            self.runs.append(({"x": x}, rep, run_dir))

    def runs_done(self):
        return self.runs

    def metrics_of(self, run_dir, values):
        rep = int(run_dir.rpartition("-r")[2])
        return {"goodput": self.goodputs[(values["x"], rep)]}


def fake_plotter(directory, fail=False):
    """A stand-in for plot-netperfmeter-results that records its arguments (or fails as it does)."""
    path = os.path.join(directory, "plotter")
    log = os.path.join(directory, "calls.jsonl")
    with open(path, "w") as f:
        f.write(f"""#!/usr/bin/env python3
import json, sys
with open({log!r}, "a") as f:
    f.write(json.dumps(sys.argv[1:]) + "\\n")
if {fail!r}:
    sys.stderr.write("plot-netperfmeter-results: x.config names no per-path vector\\n")
    sys.exit(1)
out = sys.argv[sys.argv.index("-o") + 1]
open(out, "w").write("%PDF")
""")
    os.chmod(path, 0o755)
    return path, log


class Plot(unittest.TestCase):
    def test_the_representative_run_of_each_cell_is_plotted_and_recorded(self):
        with tempfile.TemporaryDirectory() as d:
            s = study.load(write_study(d, '[traces]\nmetric = "goodput"\ntime_range = "1:2.5"'))
            plotter, log = fake_plotter(d)
            goodputs = {(1, 1): 5.0, (1, 2): 9.0, (1, 3): 7.0, (2, 1): 1.0, (2, 2): 3.0, (2, 3): 2.0, (2, 4): 8.0}
            runner = FakeRunner(s, os.path.join(d, "out"), plotter, goodputs)
            invalid = os.path.join(runner.outdir, "runs", "x=2-r4")  # left out: not a valid run
            pdfs = traces.plot(runner, lambda run_dir: run_dir != invalid)
            self.assertEqual([os.path.basename(p) for p in pdfs], ["x=1.pdf", "x=2.pdf"])
            with open(log) as f:
                calls = [json.loads(line) for line in f]
            self.assertEqual(calls[0][0], os.path.join(runner.outdir, "runs", "x=1-r3", "f0", "run.config"))
            self.assertEqual(calls[1][0], os.path.join(runner.outdir, "runs", "x=2-r3", "f0", "run.config"))
            for c in calls:
                self.assertIn("--traces", c)
                self.assertIn("--time-range=1:2.5", c)
            self.assertIn("run r3, the median of 3 by goodput (7)", calls[0][calls[0].index("--traces") + 4])
            with open(os.path.join(runner.outdir, "traces.json")) as f:
                record = json.load(f)
            self.assertEqual(record["rule"], traces.RULE)
            self.assertEqual(record["cells"]["x=2"]["runs"], {"r1": 1.0, "r2": 3.0, "r3": 2.0})
            self.assertEqual((record["cells"]["x=2"]["chosen"], record["cells"]["x=2"]["value"]), ("r3", 2.0))

    def test_a_failing_plot_is_an_error_with_the_plotters_line(self):
        with tempfile.TemporaryDirectory() as d:
            s = study.load(write_study(d, '[traces]\nmetric = "goodput"'))
            plotter, _ = fake_plotter(d, fail=True)
            runner = FakeRunner(s, os.path.join(d, "out"), plotter, {(1, 1): 5.0})
            with self.assertRaises(LabError) as e:
                traces.plot(runner, lambda run_dir: True)
            self.assertIn("names no per-path vector", str(e.exception))

    def test_a_study_without_traces_plots_nothing(self):
        with tempfile.TemporaryDirectory() as d:
            s = study.load(write_study(d, ""))
            runner = FakeRunner(s, os.path.join(d, "out"), "/nonexistent", {(1, 1): 5.0})
            self.assertEqual(traces.plot(runner, lambda run_dir: True), [])
            self.assertFalse(os.path.exists(os.path.join(runner.outdir, "traces.json")))


if __name__ == "__main__":
    unittest.main(verbosity=2)
