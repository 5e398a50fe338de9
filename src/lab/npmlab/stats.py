"""The statistics of the lab's summaries and verdicts, and reading a run's results: its JSON
document (netperfmeter --json), or the scalar files of runs made before the lab asked for one.
Standard library only.

Intervals are bootstrap BCa intervals (Efron 1987; Efron and Tibshirani 1993, ch. 14): they
assume no normal, symmetric or unimodal outcome, which the lab's are often not (a run that
collapses beside four that do not). They are drawn from a random.Random seeded by a string the
caller gives (the study seed, the cell and the metric), so that a summary made twice is the same.
A single run has no interval, fewer than MIN_RUNS have none ("too few runs"), and runs that all
measured the same value have none (no spread: the bootstrap would give a zero-width interval that
says nothing about the next run). Tests across cells are exact sign-flip permutation tests of
paired differences (the repetitions are blocks: a repetition runs every cell once, in a shuffled
order), their p-values corrected for multiplicity by Holm's step-down procedure.
t-based intervals (as R's t.test() and plot-netperfmeter-summary) remain for Stein's procedure."""

import itertools
import json
import math
import random
import statistics

from .scalars import scalar_origin, scalar_rows

# Below this many runs a cell gets no interval ("too few runs"). Measured (test_stats.py,
# Coverage: 400 samples each, 1000 resamples), the 95 % BCa interval of the mean holds the mean
# of an outcome that collapses in one run of five (80 % near 10, 20 % near 4.5) in 66 % of
# samples of 5 runs, 88 % of 10 and 96 % of 20; an exponential outcome's in 80 % of samples of 5,
# 88 % of 10 and 91 % of 20. An interval of 5 runs would claim 95 % and hold two thirds.
MIN_RUNS = 10
RESAMPLES = 4000  # bootstrap resamples per interval
EXACT_PERMUTATIONS = 16  # up to this many pairs the sign-flip test enumerates all 2^n signs
PERMUTATIONS = 20000  # beyond, this many random sign vectors


def _betacf(a, b, x):
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c if abs(1.0 + aa / c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c if abs(1.0 + aa / c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-15:
            break
    return h


def _betai(a, b, x):
    """Regularized incomplete beta function I_x(a, b)."""
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1) / (a + b + 2):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1 - x) / b


def t_cdf(t, df):
    p = 0.5 * _betai(df / 2.0, 0.5, df / (df + t * t))
    return 1 - p if t > 0 else p


def t_quantile(p, df):
    """The p-quantile of Student's t distribution with df degrees of freedom (p > 0.5)."""
    lo, hi = 0.0, 1e6
    for _ in range(200):
        mid = (lo + hi) / 2
        if t_cdf(mid, df) < p:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def mean_ci(values, level=0.95):
    """(n, mean, low, high) with the t interval; one value has none (low and high nan)."""
    n = len(values)
    if n == 0:
        return 0, math.nan, math.nan, math.nan
    mean = sum(values) / n
    if n == 1:
        return 1, mean, math.nan, math.nan
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    half = t_quantile(1 - (1 - level) / 2, n - 1) * sd / math.sqrt(n)
    return n, mean, mean - half, mean + half


_NORMAL = statistics.NormalDist()


def mean(values):
    return sum(values) / len(values)


def rng(*key):
    """The random generator of one interval or test: seeded by its key's text (the study seed, the
    cell, the metric), the same on every machine and Python version (random.Random of a str
    hashes it with SHA-512)."""
    return random.Random("/".join(map(str, key)))


def bca_bounds(estimate, replicates, jackknife, level):
    """The BCa interval (low, high) at `level` from the statistic's estimate on the sample, its
    bootstrap replicates and its jackknife (leave-one-out) values: the bias correction
    z0 = Phi^-1(share of replicates below the estimate, ties counted half) and the acceleration
    a = sum(d^3) / (6 sum(d^2)^1.5), d = mean(jackknife) - jackknife[i]; the bounds are the
    replicates' quantiles at Phi(z0 + (z0 + z) / (1 - a (z0 + z))) for z = Phi^-1 of
    (1 - level) / 2 and (1 + level) / 2 (Efron and Tibshirani 1993, (14.9)-(14.15)). The quantile
    is the order statistic at that share of the sorted replicates, interpolated between
    neighbours."""
    reps = sorted(replicates)
    b = len(reps)
    below = sum(1 for r in reps if r < estimate) + 0.5 * sum(1 for r in reps if r == estimate)
    share = min(max(below / b, 0.5 / b), 1 - 0.5 / b)
    z0 = _NORMAL.inv_cdf(share)
    centre = mean(jackknife)
    d = [centre - j for j in jackknife]
    s2 = sum(x * x for x in d)
    a = sum(x ** 3 for x in d) / (6 * s2 ** 1.5) if s2 > 0 else 0.0
    bounds = []
    for q in ((1 - level) / 2, (1 + level) / 2):
        z = _NORMAL.inv_cdf(q)
        p = _NORMAL.cdf(z0 + (z0 + z) / (1 - a * (z0 + z)))
        pos = min(max(p * b - 0.5, 0.0), b - 1.0)
        i = int(pos)
        frac = pos - i
        bounds.append(reps[i] if i + 1 >= b else reps[i] + frac * (reps[i + 1] - reps[i]))
    return bounds[0], bounds[1]


def bootstrap_bca(sample, statistic, level, key, resamples=RESAMPLES):
    """The BCa interval (low, high) of `statistic` (a function of a list of observations) on
    `sample` (observations: numbers, or tuples for paired data), drawn with rng(key)."""
    r = rng(*key)
    n = len(sample)
    replicates = [statistic(r.choices(sample, k=n)) for _ in range(resamples)]
    jackknife = [statistic(sample[:i] + sample[i + 1:]) for i in range(n)]
    return bca_bounds(statistic(sample), replicates, jackknife, level)


def interval(values, level, key, statistic=mean, resamples=RESAMPLES):
    """{"n", "estimate", "low", "high", "procedure"} of a cell's runs: the BCa interval of the
    statistic (the mean), or none (low and high None) with the procedure saying why: "single run:
    no interval", "too few runs (n < MIN_RUNS)", "no spread (all n runs equal)"."""
    values = list(values)
    n = len(values)
    out = {"n": n, "estimate": statistic(values) if n else math.nan, "low": None, "high": None}
    if n == 0:
        out["procedure"] = "no runs"
    elif n == 1:
        out["procedure"] = "single run: no interval"
    elif n < MIN_RUNS:
        out["procedure"] = f"too few runs (n = {n} < {MIN_RUNS})"
    elif all(v == values[0] for v in values):
        out["procedure"] = f"no spread (all {n} runs equal)"
    else:
        out["low"], out["high"] = bootstrap_bca(values, statistic, level, key, resamples)
        out["procedure"] = f"bca({resamples})"
    return out


def sign_flip_p(differences, alternative, key, permutations=PERMUTATIONS):
    """The p-value of the paired differences' mean against 0 by a sign-flip permutation test
    (under the null each difference is as likely positive as negative): alternative "greater"
    (mean > 0), "less" or "two-sided"; exact (all 2^n signs) up to EXACT_PERMUTATIONS pairs,
    otherwise from `permutations` random sign vectors drawn with rng(key) (p = (k + 1) / (m + 1))."""
    d = list(differences)
    n = len(d)
    if n == 0:
        return 1.0
    observed = sum(d)
    tolerance = 1e-9 * max(1.0, sum(abs(x) for x in d))

    def extreme(total):
        if alternative == "greater":
            return total >= observed - tolerance
        if alternative == "less":
            return total <= observed + tolerance
        return abs(total) >= abs(observed) - tolerance

    if n <= EXACT_PERMUTATIONS:
        hits = sum(1 for signs in itertools.product((1, -1), repeat=n)
                   if extreme(sum(s * x for s, x in zip(signs, d))))
        return hits / 2 ** n
    r = rng(*key)
    hits = sum(1 for _ in range(permutations) if extreme(sum(x if r.random() < 0.5 else -x for x in d)))
    return (hits + 1) / (permutations + 1)


def holm(pvalues):
    """Holm's step-down adjusted p-values (in the given order): the i-th smallest of m p-values
    times (m - i + 1), made monotone, at most 1. A hypothesis is rejected at family-wise level
    alpha when its adjusted p-value is below alpha."""
    m = len(pvalues)
    order = sorted(range(m), key=lambda i: pvalues[i])
    adjusted = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * pvalues[i]))
        adjusted[i] = running
    return adjusted


def read_scalars(path, side):
    """{(side, flow, name): value} of one side's scalar file (scalars.py reads it; where an object
    belongs: scalars.scalar_origin()): a flow's own figures (object "netPerfMeter.SIDE.flow[N]") by
    their names, a path's ("netPerfMeter.SIDE.flow[N].path[ID]") as "path[ID] NAME" (ID as a number,
    as document_scalars() has it), the whole connection's ("netPerfMeter.SIDE.flow[N].connection")
    as "connection NAME"; nan as nan; a figure written twice as its last line says. Raises
    ValueError."""
    scalars = {}
    for obj, name, value in scalar_rows(path):
        origin = scalar_origin(obj)
        if origin.side != side or origin.flow is None:
            continue
        depth = obj.count(".")
        if depth == 2:
            key = name
        elif depth == 3 and origin.path is not None:
            key = f"path[{origin.path}] {name}"
        elif depth == 3 and origin.connection:
            key = f"connection {name}"
        else:
            continue  # below the flow but neither a path nor the connection
        scalars[(side, origin.flow, key)] = value
    if not scalars:
        raise ValueError(f"{path}: no flow scalars")
    return scalars


# The JSON document's keys of a path's (or the whole connection's) figures and the scalar names
# they come from (src/measure/json_report.cc, pathFigures).
_PATH_FIGURES = {
    "samples": "Samples", "mean_cwnd": "Mean Cwnd", "mean_rtt_ms": "Mean RTT", "mean_unacked": "Mean Unacked",
    "mean_rwnd": "Mean Rwnd", "mean_pending": "Mean Pending", "bytes_sent": "Bytes Sent",
    "bytes_acked": "Bytes Acked", "bytes_received": "Bytes Received", "retransmissions": "Retransmissions",
    "fast_retransmissions": "Fast Retransmissions", "timer_retransmissions": "Timer Retransmissions",
    "rescheduled_chunks": "Rescheduled Chunks", "drop_reported_chunks": "Drop-Reported Chunks",
    "smartfr_ignored_acks": "Smart FR Ignored Acks",
}
_COUNTS = {"bytes": "Bytes", "packets": "Packets", "frames": "Frames", "bit_rate": "Bit Rate",
           "byte_rate": "Byte Rate", "packet_rate": "Packet Rate", "frame_rate": "Frame Rate"}


def _number(value):
    """A figure of the document: null is what the scalar file prints as nan."""
    if value is None:
        return math.nan
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"not a number: {value!r}")
    return float(value)


def _counts(put, what, block, first=None, last=None):
    """A direction's counts ("Transmitted", "Received", "Lost") as the scalar file names them."""
    if block is None:
        return
    if first is not None:
        put(first, block["first_us"])
        put(last, block["last_us"])
    for k, name in _COUNTS.items():
        if k in block:
            put(f"{what} {name}", block[k])


def load_document(path):
    """The JSON document of a run (netperfmeter --json); raises OSError or ValueError."""
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    if not isinstance(doc, dict) or doc.get("type") != "result" or not isinstance(doc.get("flows"), list):
        raise ValueError(f"{path}: not a netperfmeter result document")
    return doc


def document_scalars(doc, path="the document"):
    """{(side, flow, name): value} of both sides from a run's JSON document: the same keys and
    values as read_scalars() gives for the two scalar files (a path's figures as "path[ID] NAME",
    the whole connection's as "connection NAME"); raises ValueError."""
    scalars = {}
    try:
        for flow in doc["flows"]:
            n = int(flow["flow_id"])
            for side, other in (("active", "passive"), ("passive", "active")):
                def put(name, value, side=side):
                    scalars[(side, n, name)] = _number(value)
                received = flow[f"{other}_to_{side}"]
                _counts(put, "Transmitted", flow[f"{side}_to_{other}"]["transmitted"],
                        "First Transmission", "Last Transmission")
                _counts(put, "Received", received["received"], "First Reception", "Last Reception")
                _counts(put, "Lost", received["lost"])
                for k, name in (("jitter_ms", "Jitter"), ("mean_delay_ms", "Mean Delay")):
                    if k in received:
                        put(name, received[k])
                for p in flow["paths"][side] or []:
                    for k, name in _PATH_FIGURES.items():
                        if k in p:
                            put(f"path[{int(p['path_id'])}] {name}", p[k])
                whole = flow["connection"][side] or {}
                for k, name in _PATH_FIGURES.items():
                    if k in whole:
                        put(f"connection {name}", whole[k])
    except (KeyError, TypeError, AttributeError) as e:
        raise ValueError(f"{path}: malformed result document ({type(e).__name__}: {e})") from None
    if not scalars:
        raise ValueError(f"{path}: no flow figures")
    return scalars


def document_cpu_idle(doc, side):
    """The idle share (percent, all cores) of one side from a run's JSON document; None if absent."""
    try:
        value = doc["cpu"][side]["total"]["idle"]
    except (KeyError, TypeError):
        return None
    return None if value is None else float(value)


def read_cpu_idle(path, side):
    """The idle share (percent, all cores) during the measurement from a scalar file (its last
    "Idle" of "netPerfMeter.SIDE.totalCPU", as read_scalars() takes a figure); None if absent, nan
    or the file cannot be read."""
    try:
        idle = [value for obj, name, value in scalar_rows(path)
                if obj == f"netPerfMeter.{side}.totalCPU" and name == "Idle"]
    except ValueError:
        return None
    return idle[-1] if idle and not math.isnan(idle[-1]) else None
