"""Means with t-based confidence intervals (as R's t.test() and plot-netperfmeter-summary),
and reading a run's scalar files. Standard library only."""

import bz2
import math
import re

_SCALAR = re.compile(r'^scalar\s+"netPerfMeter\.(active|passive)\.flow\[(\d+)\](\.path\[\d+\]|\.connection)?"\s+'
                     r'"([^"]+)"\s+(\S+)\s*$')


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
    """(n, mean, low, high); with one value the interval is the value itself."""
    n = len(values)
    if n == 0:
        return 0, math.nan, math.nan, math.nan
    mean = sum(values) / n
    if n == 1:
        return 1, mean, mean, mean
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    half = t_quantile(1 - (1 - level) / 2, n - 1) * sd / math.sqrt(n)
    return n, mean, mean - half, mean + half


def read_scalars(path, side):
    """{(side, flow, name): value} of one .sca or .sca.bz2 file; raises OSError/EOFError/ValueError."""
    opener = bz2.open if path.endswith(".bz2") else open
    scalars = {}
    with opener(path, "rt", errors="replace") as f:
        for line in f:
            m = _SCALAR.match(line)
            if m and m.group(1) == side:
                # a path's scalars as "path[ID] NAME" of its flow, e.g. "path[1] Bytes Sent"; the
                # whole MPTCP connection's or SCTP association's as "connection NAME"
                name = m.group(4) if m.group(3) is None else f"{m.group(3)[1:]} {m.group(4)}"
                scalars[(side, int(m.group(2)), name)] = float(m.group(5))
    if not scalars:
        raise ValueError(f"{path}: no flow scalars")
    return scalars


_CPU_IDLE = re.compile(r'^scalar\s+"netPerfMeter\.(active|passive)\.totalCPU"\s+"Idle"\s+(\S+)\s*$')


def read_cpu_idle(path, side):
    """The idle share (percent, all cores) during the measurement from a scalar file; None if absent."""
    opener = bz2.open if path.endswith(".bz2") else open
    try:
        with opener(path, "rt", errors="replace") as f:
            for line in f:
                m = _CPU_IDLE.match(line)
                if m and m.group(1) == side:
                    return float(m.group(2))
    except (OSError, EOFError, ValueError):
        return None
    return None
