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
from npmlab import stats  # noqa: E402


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


if __name__ == "__main__":
    unittest.main(verbosity=2)
