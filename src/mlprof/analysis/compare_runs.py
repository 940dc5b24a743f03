"""Several runs per side: a step-time verdict on the spread between runs, not only between steps.

Two runs of the same code differ as a whole (memory layout, CPU frequency, what
else the host ran): each run's steps are steady around an offset of its own. One
run per side cannot see that offset, so a single-run verdict calls nothing under
a margin measured on this class of machine (``stats.MIN_CHANGE``,
``stats.CPU_MIN_CHANGE``). With several runs per side the offset is measured:
each run is summarised by the median of its per-step times (robust to a slow
step), and the two sides' log-medians are compared with a pooled two-sample
Student t interval (same machine, so one run-to-run variance for both sides).
The interval then holds the run-to-run spread, and the margin drops to what a
user would call a change at all (``RUNS_MIN_CHANGE``).
"""

from __future__ import annotations

import math
import statistics

from mlprof.analysis.stats import CONFIDENCE, MIN_STEPS, Verdict, _pct

__all__ = ["runs_verdict", "t_quantile", "RUNS_MIN_CHANGE", "MIN_RUNS"]

# With several runs per side the runs' own spread is in the interval: a smaller margin remains, for
# changes too small to matter.
RUNS_MIN_CHANGE = 0.02
# A pooled interval needs one degree of freedom: three runs in all (two on one side).
MIN_RUNS = 3


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the incomplete beta function (modified Lentz)."""
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
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-14:
            break
    return h


def _betainc(a: float, b: float, x: float) -> float:
    """The regularised incomplete beta function I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def _t_cdf(t: float, df: float) -> float:
    tail = 0.5 * _betainc(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t >= 0 else tail


def t_quantile(p: float, df: float) -> float:
    """The ``p`` quantile of Student's t with ``df`` degrees of freedom (bisection on its CDF)."""
    if not 0.0 < p < 1.0 or df <= 0:
        raise ValueError(f"t_quantile: need 0 < p < 1 and df > 0, got p={p}, df={df}")
    lo, hi = -1e6, 1e6
    for _ in range(200):
        mid = (lo + hi) / 2
        if _t_cdf(mid, df) < p:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def _run_value(steps: list[float]) -> float:
    return math.log(max(statistics.median(steps), 1.0))


def runs_verdict(base_runs: list[list[float]], new_runs: list[list[float]], min_change: float = RUNS_MIN_CHANGE,
                 confidence: float = CONFIDENCE, measure: str = "wall time") -> Verdict:
    """The verdict on per-step times (ns) of several runs per side: each inner list is one run's steps."""
    base_runs = [list(r) for r in base_runs if len(r)]
    new_runs = [list(r) for r in new_runs if len(r)]
    m, n = len(base_runs), len(new_runs)
    steps_b, steps_n = sum(map(len, base_runs)), sum(map(len, new_runs))
    runs = f"{m} vs {n} runs"
    short = min((len(r) for r in base_runs + new_runs), default=0)

    def verdict(kind: str, change, low, high, sentence: str) -> Verdict:
        return Verdict(kind, change, low, high, confidence, steps_b, steps_n, sentence, measure=measure,
                       margin_pct=round(100 * min_change, 3), base_runs=m, new_runs=n)

    if not m or not n or m + n < MIN_RUNS or short < MIN_STEPS:
        why = (f"every run needs at least {MIN_STEPS} steps" if m and n and m + n >= MIN_RUNS
               else f"{runs}: at least {MIN_RUNS} runs in all, one or more per side")
        return verdict("inconclusive", None, None, None, f"inconclusive: {why}")
    vb = [_run_value(r) for r in base_runs]
    vn = [_run_value(r) for r in new_runs]
    mean_b, mean_n = sum(vb) / m, sum(vn) / n
    ss = sum((v - mean_b) ** 2 for v in vb) + sum((v - mean_n) ** 2 for v in vn)
    df = m + n - 2
    spread = math.sqrt(ss / df) * math.sqrt(1 / m + 1 / n)
    half = t_quantile(1 - (1 - confidence) / 2, df) * spread
    diff = mean_n - mean_b
    est, low, high = math.expm1(diff), math.expm1(diff - half), math.expm1(diff + half)
    level = f"{confidence * 100:g}% CI"
    detail = f"{level} {100 * low:+.1f}%..{100 * high:+.1f}%, {runs} of {steps_b} vs {steps_n} steps"
    if (low > 0 or high < 0) and abs(est) < min_change:
        kind, sentence = "no change", (f"no change beyond the {100 * min_change:g}% margin: {100 * est:+.1f}% "
                                       f"({detail})")
    elif low > 0:
        kind, sentence = "slower", f"NEW is {_pct(est)} slower ({detail})"
    elif high < 0:
        kind, sentence = "faster", f"NEW is {_pct(est)} faster ({detail})"
    else:
        kind, sentence = "no change", f"no change beyond the runs' spread: {100 * est:+.1f}% ({detail})"
    return verdict(kind, round(100 * est, 3), round(100 * low, 3), round(100 * high, 3), sentence)
