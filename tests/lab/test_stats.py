"""The statistics of the lab's summaries and verdicts (npmlab/stats.py): BCa intervals on a sample
worked out by hand, their coverage on skewed and bimodal outcomes, the sign-flip test, Holm's
correction; and the verdict rules of the study files (npmlab/verdict.py). No root, no network.

usage: test_stats.py LAB_PROGRAM LAB_SOURCE_DIR
"""

import itertools
import math
import random
import sys
import unittest

LAB, LAB_SRC = sys.argv[1:3]
del sys.argv[1:3]
sys.path.insert(0, LAB_SRC)
from npmlab import stats, study, verdict  # noqa: E402
from npmlab.runner import Runner, Tools, label as runner_label  # noqa: E402
from npmlab.topology import LabError  # noqa: E402

import csv  # noqa: E402
import glob  # noqa: E402
import os  # noqa: E402
import re  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402

STUDIES = os.path.join(LAB_SRC, "studies")
# A study of two arms (variant) at two rates: the rules below are judged on synthetic runs
TWO_ARMS = """name = "two"
runtime = 2
repetitions = 1
[sweep]
rho = [5, 10]
variant = ["a", "b"]
[[paths]]
rate = "{rho}mbit"
delay_ms = 1
[[flows]]
protocol = "tcp"
spec = "const0:const1400"
[[metrics]]
name = "goodput"
value = "goodput(0) / 1e6"
"""


class Bca(unittest.TestCase):
    def test_bca_on_the_exact_bootstrap_of_three_values(self):
        # x = 1, 2, 6 (mean 3). Its exact bootstrap: the 27 ordered resamples, whose means sorted
        # are 1, 4/3 x3, 5/3 x3, 2, 8/3 x3, 3 x6, 10/3 x3, 13/3 x3, 14/3 x3, 6; 11 below 3 and 6
        # equal: share (11 + 3) / 27 = 14/27, z0 = Phi^-1(14/27) = 0.046436. Jackknife means 4, 3.5,
        # 1.5 (their mean 3): d = -1, -0.5, 1.5, a = (-1 - 0.125 + 3.375) / (6 * 3.5^1.5) = 0.057270.
        # 90 %: Phi(z0 + (z0 - 1.645) / (1 - a (z0 - 1.645))) = 0.078105, position 27 p - 0.5 =
        # 1.609 between the 2nd and 3rd order statistic (both 4/3); the upper 0.972515, position
        # 25.758 between 14/3 and 6: 14/3 + 0.758 * 4/3 = 5.6772.
        x = [1, 2, 6]
        replicates = [sum(c) / 3 for c in itertools.product(x, repeat=3)]
        jackknife = [sum(x[:i] + x[i + 1:]) / 2 for i in range(3)]
        low, high = stats.bca_bounds(3.0, replicates, jackknife, 0.90)
        self.assertAlmostEqual(low, 4 / 3, places=9)
        self.assertAlmostEqual(high, 14 / 3 + (25.75790586568832 - 25) * 4 / 3, places=6)
        self.assertAlmostEqual(high, 5.6772, places=4)
        # a symmetric sample has no bias correction and no acceleration: the percentile interval
        symmetric = [-1.0, 0.0, 1.0]
        reps = [sum(c) / 3 for c in itertools.product(symmetric, repeat=3)]
        jack = [sum(symmetric[:i] + symmetric[i + 1:]) / 2 for i in range(3)]
        low, high = stats.bca_bounds(0.0, reps, jack, 0.90)
        self.assertAlmostEqual(low, -high, places=9)

    def test_resampled_bca_approaches_the_exact_one_and_is_reproducible(self):
        x = [1.0, 2.0, 6.0, 2.5, 9.0]
        exact = [sum(c) / 5 for c in itertools.product(x, repeat=5)]  # all 3125 ordered resamples
        jack = [sum(x[:i] + x[i + 1:]) / 4 for i in range(5)]
        want = stats.bca_bounds(stats.mean(x), exact, jack, 0.95)
        got = stats.bootstrap_bca(x, stats.mean, 0.95, ("seed", 7), resamples=40000)
        self.assertAlmostEqual(got[0], want[0], delta=0.08)
        self.assertAlmostEqual(got[1], want[1], delta=0.08)
        self.assertEqual(stats.bootstrap_bca(x, stats.mean, 0.95, ("seed", 7), resamples=500),
                         stats.bootstrap_bca(x, stats.mean, 0.95, ("seed", 7), resamples=500))
        self.assertNotEqual(stats.bootstrap_bca(x, stats.mean, 0.95, ("seed", 7), resamples=500),
                            stats.bootstrap_bca(x, stats.mean, 0.95, ("seed", 8), resamples=500))

    def test_no_interval_of_zero_width(self):
        one = stats.interval([4.2], 0.95, ("k",))
        self.assertEqual((one["n"], one["estimate"], one["low"], one["high"]), (1, 4.2, None, None))
        self.assertEqual(one["procedure"], "single run: no interval")
        few = stats.interval([1.0, 2.0, 3.0], 0.95, ("k",))
        self.assertIsNone(few["low"])
        self.assertEqual(few["procedure"], f"too few runs (n = 3 < {stats.MIN_RUNS})")
        same = stats.interval([0.0] * stats.MIN_RUNS, 0.95, ("k",))
        self.assertIsNone(same["low"])
        self.assertEqual(same["procedure"], f"no spread (all {stats.MIN_RUNS} runs equal)")
        enough = stats.interval(list(range(stats.MIN_RUNS)), 0.95, ("k",))
        self.assertLess(enough["low"], enough["estimate"])
        self.assertLess(enough["estimate"], enough["high"])
        n, mean, low, high = stats.mean_ci([4.2])
        self.assertTrue(math.isnan(low) and math.isnan(high))


class Coverage(unittest.TestCase):
    """How often the 95 % BCa interval of the mean holds the true mean, over 400 samples each (the
    figures MIN_RUNS rests on); a wrong bias correction or acceleration shows here as coverage far
    below the level or as misses all on one side."""

    SAMPLES = 400

    def coverage(self, draw, truth, n):
        held = above = below = 0
        for s in range(self.SAMPLES):
            r = random.Random(f"coverage-{n}-{s}")
            x = [draw(r) for _ in range(n)]
            low, high = stats.bootstrap_bca(x, stats.mean, 0.95, ("coverage", s), resamples=1000)
            held += low <= truth <= high
            above += truth < low
            below += high < truth
        return held / self.SAMPLES, above, below

    def test_a_skewed_outcome(self):
        held, above, below = self.coverage(lambda r: r.expovariate(1.0), 1.0, 20)
        print(f"exponential, n = 20: BCa covers {held:.3f} (truth above the interval {below}, below it {above})")
        self.assertGreater(held, 0.88)
        self.assertLess(held, 0.99)
        # the t interval misses almost only above (2 against 32 of 400, measured): BCa balances
        # the tails to within a factor of 3
        self.assertLess(below, 3 * max(above, 1) + 3)
        t_below = 0
        for s in range(self.SAMPLES):
            r = random.Random(f"coverage-20-{s}")
            _, _, _, high = stats.mean_ci([r.expovariate(1.0) for _ in range(20)])
            t_below += high < 1.0
        self.assertLess(below, t_below, "BCa misses less often above than the t interval")

    def test_a_bimodal_outcome_needs_min_runs(self):
        def draw(r):
            return r.gauss(4.5, 0.1) if r.random() < 0.2 else r.gauss(10.0, 0.3)
        truth = 0.2 * 4.5 + 0.8 * 10.0
        at_min, _, _ = self.coverage(draw, truth, stats.MIN_RUNS)
        at_20, _, _ = self.coverage(draw, truth, 20)
        at_5, _, _ = self.coverage(draw, truth, 5)
        print(f"one run in five collapsed: BCa covers {at_5:.3f} with 5 runs, {at_min:.3f} with {stats.MIN_RUNS}, "
              f"{at_20:.3f} with 20")
        self.assertLess(at_5, 0.75, "5 runs are too few for an interval of such an outcome")
        self.assertGreater(at_min, 0.80)
        self.assertGreater(at_20, 0.90)


class Tests(unittest.TestCase):
    def test_the_sign_flip_test_exactly(self):
        # 5 positive differences: only the all-plus signs reach the sum: p = 1/32 one-sided
        self.assertAlmostEqual(stats.sign_flip_p([1, 2, 3, 4, 5], "greater", ("k",)), 1 / 32)
        self.assertAlmostEqual(stats.sign_flip_p([1, 2, 3, 4, 5], "two-sided", ("k",)), 2 / 32)
        self.assertAlmostEqual(stats.sign_flip_p([1, 2, 3, 4, 5], "less", ("k",)), 1.0)
        # d = 3, -1, 2: sums of +-3 +-1 +-2 >= 4: (3,1,2)=6, (3,-1,2)=4: p = 2/8
        self.assertAlmostEqual(stats.sign_flip_p([3, -1, 2], "greater", ("k",)), 2 / 8)
        # beyond the exact range: Monte Carlo, reproducible, near the exact value
        d = [1.0] * 20
        p = stats.sign_flip_p(d, "greater", ("k",))
        self.assertAlmostEqual(p, 1 / 20001)
        self.assertEqual(stats.sign_flip_p([0.3, -0.1] * 10, "greater", ("a",)),
                         stats.sign_flip_p([0.3, -0.1] * 10, "greater", ("a",)))

    def test_the_sign_flip_test_holds_its_level_under_the_null(self):
        # skewed differences symmetric about 0 (a difference of two exponentials): rejections at
        # 0.05 in 1000 samples of 8 stay near 5 % (binomial sd 0.7 %)
        rejected = 0
        for s in range(1000):
            r = random.Random(f"null-{s}")
            d = [r.expovariate(1.0) - r.expovariate(1.0) for _ in range(8)]
            rejected += stats.sign_flip_p(d, "greater", ("null", s)) < 0.05
        self.assertLess(rejected / 1000, 0.065)
        self.assertGreater(rejected / 1000, 0.02)

    def test_holm(self):
        # p = 0.01, 0.04, 0.03, 0.005 (m = 4): sorted 0.005 0.01 0.03 0.04, times 4 3 2 1:
        # 0.02 0.03 0.06 0.04 -> monotone 0.02 0.03 0.06 0.06
        self.assertEqual([round(p, 12) for p in stats.holm([0.01, 0.04, 0.03, 0.005])], [0.03, 0.06, 0.06, 0.02])
        self.assertEqual([round(p, 12) for p in stats.holm([0.2, 0.9])], [0.4, 0.9])
        self.assertEqual(stats.holm([]), [])


def runs(effect, spread, n, seed=1):
    """Synthetic summary rows: variant a = variant b + effect (+ noise of `spread`), n repetitions."""
    r = random.Random(seed)
    rows = []
    for rep in range(1, n + 1):
        for rho in (5, 10):
            base = rho * 0.9 + r.gauss(0, 0.3)
            rows.append(({"rho": rho, "variant": "b"}, rep, {"goodput": base}, "valid", ""))
            rows.append(({"rho": rho, "variant": "a"}, rep, {"goodput": base + effect + r.gauss(0, spread)},
                         "valid", ""))
    return rows


class Verdicts(unittest.TestCase):
    def load(self, rules):
        with tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False) as f:
            f.write(TWO_ARMS + rules)
        self.addCleanup(os.unlink, f.name)
        return study.load(f.name), f.name

    GREATER = """[[verdict]]
claim = "a above b"
metric = "goodput"
arm = { variant = "a" }
against = { variant = "b" }
direction = "greater"
band = [0.8, 1.2]
paper = 1.0
"""

    def test_each_verdict_on_runs_made_for_it(self):
        s, _ = self.load(self.GREATER)

        def judged(effect, spread, n):
            return verdict.apply(s, runs(effect, spread, n), 7)[0]
        self.assertEqual(judged(1.0, 0.05, 12)["verdict"], "reproduced")
        got = judged(3.0, 0.05, 12)
        self.assertEqual(got["verdict"], "reproduced in direction only", got["reason"])
        self.assertIn("outside the band", got["reason"])
        # 6 pairs: the test can pass Holm over 2 cells (1/64 < 0.025), no interval: size undetermined
        got = judged(1.0, 0.05, 6)
        self.assertEqual(got["verdict"], "reproduced in direction only", got["reason"])
        self.assertIn("undetermined", got["reason"])
        # 5 pairs over 2 cells: 1/32 > 0.05/2, nothing can be shown
        got = judged(1.0, 0.05, 5)
        self.assertEqual(got["verdict"], "inconclusive", got["reason"])
        self.assertIn("6 pairs per cell", got["reason"])
        got = judged(-1.0, 0.05, 12)
        self.assertEqual(got["verdict"], "not reproduced", got["reason"])
        self.assertIn("opposite", got["reason"])
        # no effect, measured precisely: the paper's size is ruled out
        got = judged(0.0, 0.05, 12)
        self.assertEqual(got["verdict"], "not reproduced", got["reason"])
        self.assertIn("size outside the band", got["reason"])
        self.assertEqual(judged(1.0, 0.05, 3)["verdict"], "inconclusive")
        # reproducible from the seed
        self.assertEqual(judged(1.0, 0.5, 12), judged(1.0, 0.5, 12))
        # invalid runs are left out
        rows = [(v, rep, m, "invalid", "") for v, rep, m, _, _ in runs(1.0, 0.05, 12)]
        self.assertEqual(verdict.apply(s, rows, 7)[0]["verdict"], "inconclusive")

    def test_the_dry_run_says_which_rules_the_repetitions_can_decide(self):
        # two cells (rho = 5 and 10): an exact sign-flip test of n pairs passes Holm's first step
        # only with 2^-n < 0.05 / 2, so 6 pairs; one cell needs the lab's minimum, 5
        s, path = self.load(self.GREATER + self.GREATER.replace("a above b", "a above b at 10").replace(
            "direction", "where = { rho = [10] }\ndirection"))
        self.assertEqual(verdict.power(s, 5), [
            "  verdict[1]: 2 cells, 6 pairs per cell needed (alpha 0.05, Holm): 5 repetitions too few: it can only "
            "be inconclusive",
            "  verdict[2]: 1 cell, 5 pairs per cell needed (alpha 0.05, Holm): 5 repetitions can show it"])
        self.assertIn("6 repetitions can show it", verdict.power(s, 6)[0])
        self.assertEqual([len(verdict.rule_cells(rule, list(s.combinations()))) for rule in s.verdicts], [2, 1])
        r = subprocess.run([sys.executable, LAB, "run", "--dry-run", "--repetitions", "6", path], capture_output=True,
                           text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("verdict[1]: 2 cells, 6 pairs per cell needed (alpha 0.05, Holm): 6 repetitions can show it",
                      r.stdout)

    def test_within_a_band(self):
        s, _ = self.load("""[[verdict]]
claim = "a as b"
metric = "goodput"
arm = { variant = "a" }
against = { variant = "b" }
direction = "within"
band = [-0.3, 0.3]
""")
        self.assertEqual(verdict.apply(s, runs(0.0, 0.05, 12), 7)[0]["verdict"], "reproduced")
        self.assertEqual(verdict.apply(s, runs(1.0, 0.05, 12), 7)[0]["verdict"], "not reproduced")

    def test_bad_rows_are_refused_with_file_line_and_key(self):
        for bad, said in (("direction = \"greater\"", "against: is needed with direction = \"greater\""),
                          ("direction = \"up\"", "is not one of greater, less, within"),
                          ("metric = \"speed\"", "\"speed\" is not a metric of the study"),
                          ("arm = { variant = \"c\" }", "\"c\" is not a value of the sweep's variant"),
                          ("band = [2, 1]", "must be [low, high] with low < high"),
                          ("paper = 3.0", "3.0 lies outside its band"),
                          ("alpha = 0.7", "between 0 and 0.5"),
                          ("test = \"t\"", "is not a test of the lab"),
                          ("against = { variant = \"a\" }", "is the arm itself"),
                          ("colour = 1", "unknown key")):
            text = self.GREATER
            key = bad.split(" =")[0]
            lines = [line for line in text.splitlines() if not line.startswith(key + " =")]
            if bad.startswith("direction = \"greater\""):
                lines = [line for line in lines if not line.startswith("against")]  # greater without against
            text = "\n".join(lines + [bad]) + "\n"
            with self.subTest(bad=bad):
                with self.assertRaises(study.StudyError) as e:
                    self.load(text)
                self.assertIn(said, str(e.exception))
                self.assertRegex(str(e.exception), r"^\S+\.toml:\d+: verdict\[1\]")
        # through the program: one line, non-zero
        with tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False) as f:
            f.write(TWO_ARMS + self.GREATER.replace("band = [0.8, 1.2]", "band = [1.2]"))
        self.addCleanup(os.unlink, f.name)
        path = f.name
        r = subprocess.run([sys.executable, LAB, "run", "--dry-run", path], capture_output=True, text=True)
        self.assertNotEqual(r.returncode, 0)
        self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
        self.assertIn("verdict[1].band", r.stderr)

    def test_every_shipped_study_has_rules_and_each_has_cells(self):
        for path in sorted(glob.glob(os.path.join(STUDIES, "*.toml"))):
            s = study.load(path)
            with self.subTest(study=os.path.basename(path)):
                self.assertTrue(s.verdicts, "a verdict rule per shipped study")
                judged = verdict.apply(s, [], 1)
                self.assertTrue(all(j["cells"] for j in judged), [j["key"] for j in judged if not j["cells"]])
                self.assertTrue(all(j["verdict"] == "inconclusive" for j in judged))


class Figures(unittest.TestCase):
    """The lab's figures draw the intervals of summary.csv: write_summaries() on synthetic runs (a
    cell of 12 runs, one of 5, one whose 12 runs measured the same value), then plot() with the real
    plotter; the error bars it drew (its --dump, the data of its error-bar layer) against
    summary.csv's ci_low and ci_high, and none where summary.csv has none."""

    def test_the_figure_draws_summary_csvs_intervals(self):
        with open(LAB) as f:
            plotter = re.search(r'"plot-netperfmeter-summary": "([^"]*)"', f.read()).group(1)
        if not shutil.which("Rscript") or not os.path.exists(plotter):
            self.skipTest(f"no plotter ({plotter}) or no Rscript (r-base-core)")
        with tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False) as f:
            f.write(TWO_ARMS)
        self.addCleanup(os.unlink, f.name)
        s = study.load(f.name)
        out = tempfile.mkdtemp(prefix="npmlab-figures-")
        self.addCleanup(shutil.rmtree, out, True)
        rows = [(values, rep, dict(metrics), validity, problems)
                for values, rep, metrics, validity, problems in runs(1.0, 0.3, 12, seed=5)
                if not (values == {"rho": 10, "variant": "a"} and rep > 5)]
        for values, _, metrics, _, _ in rows:
            if values == {"rho": 5, "variant": "b"}:
                metrics["goodput"] = 4.5
        runner = Runner(s, out, Tools({"plot-netperfmeter-summary": plotter}), seed=7)
        runner.write_summaries(rows, {(runner_label(values), rep): 0 for values, rep, _, _, _ in rows})
        try:
            pdfs = runner.plot()
        except LabError as e:
            if "cannot find the R package npmplot" in str(e) or "needs the R package" in str(e):
                self.skipTest(str(e))
            raise
        self.assertEqual(pdfs, [os.path.join(out, "goodput.pdf")])
        with open(os.path.join(out, "summary.csv")) as f:
            summary = {(r["rho"], r["variant"]): r for r in csv.DictReader(f) if r["metric"] == "goodput"}
        with open(os.path.join(out, "tables", "lab-goodput-plotted.csv")) as f:
            plotted = {(r["rho"], r["variant"]): r for r in csv.DictReader(f)}
        self.assertEqual(set(plotted), set(summary))
        procedures = {k: r["procedure"] for k, r in summary.items()}
        self.assertEqual(procedures, {("5", "a"): "bca(4000)", ("5", "b"): "no spread (all 12 runs equal)",
                                      ("10", "a"): "too few runs (n = 5 < 10)", ("10", "b"): "bca(4000)"})
        for key, row in summary.items():
            got = plotted[key]
            self.assertEqual((got["N"], got["Interval"]), (row["n"], row["procedure"]), key)
            self.assertAlmostEqual(float(got["Mean"]), float(row["mean"]), delta=1e-12 * abs(float(row["mean"])))
            if row["ci_low"] == "NA":
                self.assertEqual((got["Lower"], got["Upper"]), ("NA", "NA"), key)
            else:
                for mine, theirs in ((got["Lower"], row["ci_low"]), (got["Upper"], row["ci_high"])):
                    self.assertAlmostEqual(float(mine), float(theirs), delta=1e-12 * abs(float(theirs)), msg=key)
        # the error-bar layer of the same figure draws exactly the dumped intervals, at those points
        lib = os.path.join(os.path.dirname(plotter), "library")
        r = subprocess.run(["Rscript", "-e", """
            a <- commandArgs(TRUE)
            suppressPackageStartupMessages(library(npmplot, lib.loc = a[1]))
            d <- npm_read_summary(a[2])
            p <- npm_plot_summary(d, x = "rho", y = "goodput", colour = "variant", ci = "given", runs = TRUE)
            b <- ggplot2::ggplot_build(p)
            bars <- Filter(function(l) all(c("ymin", "ymax") %in% names(l)), b$data)[[1]]
            write.csv(data.frame(x = bars$x, ymin = bars$ymin, ymax = bars$ymax), stdout(), row.names = FALSE)
            cat(gsub("\n", " ", p$labels$caption), "\n", file = stderr())
            """, lib, os.path.join(out, "tables", "lab-goodput.data.bz2")], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        bars = sorted((round(float(b["ymin"]), 9), round(float(b["ymax"]), 9))
                      for b in csv.DictReader(r.stdout.splitlines()))
        want = sorted((round(float(row["ci_low"]), 9), round(float(row["ci_high"]), 9))
                      for row in summary.values() if row["ci_low"] != "NA")
        self.assertEqual(bars, want)
        self.assertIn("none at 2 of 4 points: no spread (all 12 runs equal); too few runs (n = 5 < 10).", r.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
