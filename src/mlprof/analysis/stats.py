"""Statistics for comparing two runs' per-step times: robust summaries and a rank-based shift.

numpy only. Steps of one run are samples of one distribution (independent
draws, not pairs), so two runs are compared with the Hodges-Lehmann shift
estimate and its distribution-free confidence interval, the one inverted from
the Mann-Whitney rank-sum test:

* the estimate is the median of all ``m x n`` differences ``new_j - base_i``;
* the interval runs from the ``c``-th smallest to the ``c``-th largest of
  those differences, where ``c`` is the largest count with
  ``P(U < c) <= alpha / 2`` under "no change" (``U`` the Mann-Whitney
  statistic: exact for small samples, the normal approximation beyond).

Step *times* are compared on a log scale, so the shift is a ratio
(``exp(shift) - 1`` is the relative change) and one slow step cannot move it
much; breakdown rows, which can be 0, are compared in ns.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from mlprof.settings.schedule import MIN_STEPS, RECOMMENDED_STEPS

__all__ = ["Distribution", "Shift", "Verdict", "describe", "shift", "relative_verdict",
           "MIN_STEPS", "RECOMMENDED_STEPS", "CONFIDENCE", "MIN_CHANGE", "CPU_MIN_CHANGE"]

CONFIDENCE = 0.95
# Two runs of the same code differ by a few percent as a whole (memory layout, CPU frequency, the
# machine's load at that moment) even when each run's steps are steady: a shift whose estimate is
# under this fraction reads "no change", even when its interval excludes zero.
MIN_CHANGE = 0.05
# On CPU-only runs the runs' offset is larger: two runs of the same loop on a 2-vCPU VM came out up to
# 19% apart at 20 steps each (docs/benchmarks.md, compare verdicts), while twice the work was never under +28%.
CPU_MIN_CHANGE = 0.20
# Exact null distribution of U up to this many steps per run, normal approximation beyond.
_EXACT_MAX = 60
# At most this many pairwise differences: longer runs are thinned to evenly spaced
# order statistics first (a wider, never narrower, interval; memory stays bounded).
_MAX_PAIRS = 1_000_000


@dataclass(frozen=True)
class Distribution:
    """Robust summary of one quantity over the steps of one run (ns)."""

    count: int
    median_ns: float
    mean_ns: float
    min_ns: float
    max_ns: float
    q1_ns: float  # 25th percentile
    q3_ns: float  # 75th percentile
    iqr_ns: float  # q3 - q1
    mad_ns: float  # median absolute deviation from the median (unscaled)


@dataclass(frozen=True)
class Shift:
    """Hodges-Lehmann shift of NEW against BASE with its confidence interval.

    In the unit compared: ns for breakdown rows; for step time (``log=True``)
    the fields are relative changes (0.1 = 10% slower, -0.5 = twice as fast).
    ``low``/``high`` are None when the samples are too small for an interval.
    """

    estimate: float
    low: float | None
    high: float | None
    confidence: float
    base_count: int
    new_count: int  # values used per side (long runs thinned to at most 1,000,000 pairs)


@dataclass(frozen=True)
class Verdict:
    """Did NEW get faster or slower than BASE beyond the step-to-step noise?"""

    verdict: str  # "faster", "slower", "no change" or "inconclusive"
    change_pct: float | None  # estimated relative change of step time, % (> 0 slower)
    low_pct: float | None  # confidence interval of change_pct
    high_pct: float | None
    confidence: float
    base_steps: int
    new_steps: int
    sentence: str
    # What decided: "wall time", or a measure the machine's load does not stretch (compare_load).
    measure: str = "wall time"
    # The smallest change called faster/slower: runs of the same code differ this much as a whole.
    margin_pct: float | None = None
    # Runs per side (several: the interval is the runs' spread, not the steps').
    base_runs: int = 1
    new_runs: int = 1


def describe(values) -> Distribution | None:
    """Count, median, mean, quartiles, MAD, min and max of ``values`` (None when empty)."""
    v = np.asarray(list(values), dtype=float)
    if v.size == 0:
        return None
    q1, med, q3 = np.percentile(v, [25, 50, 75])
    return Distribution(count=int(v.size), median_ns=float(med), mean_ns=float(v.mean()), min_ns=float(v.min()),
                        max_ns=float(v.max()), q1_ns=float(q1), q3_ns=float(q3), iqr_ns=float(q3 - q1),
                        mad_ns=float(np.median(np.abs(v - med))))


def _u_null_counts(m: int, n: int) -> list[int]:
    """How many of the C(m+n, m) rank orders give each U = 0 .. m*n (the Gaussian binomial coefficient)."""
    size = m * n + 1
    poly = [0] * size
    poly[0] = 1
    for i in range(1, m + 1):
        # Multiply by (1 - q^(n+i)), then divide by (1 - q^i): exact integers.
        step = n + i
        for k in range(size - 1, step - 1, -1):
            poly[k] -= poly[k - step]
        for k in range(i, size):
            poly[k] += poly[k - i]
    return poly


@lru_cache(maxsize=256)
def _interval_rank(m: int, n: int, confidence: float) -> int:
    """The ``c`` of the interval [D_(c), D_(mn+1-c)] (1-based); 0 when no interval reaches ``confidence``."""
    alpha_half = (1 - confidence) / 2
    if max(m, n) <= _EXACT_MAX:
        counts = _u_null_counts(m, n)
        total = math.comb(m + n, m)
        c, below = 0, 0
        # P(U <= c - 1) <= alpha/2: cumulative counts, exact.
        while c < len(counts) and (below + counts[c]) <= alpha_half * total:
            below += counts[c]
            c += 1
        return c
    z = _normal_quantile(1 - alpha_half)
    c = int(math.floor(m * n / 2 - z * math.sqrt(m * n * (m + n + 1) / 12)))
    return max(c, 0)


def _normal_quantile(p: float) -> float:
    # Bisection on the normal CDF (erf): exact enough for a confidence level.
    lo, hi = -10.0, 10.0
    for _ in range(100):
        mid = (lo + hi) / 2
        if 0.5 * (1 + math.erf(mid / math.sqrt(2))) < p:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def shift(base, new, log: bool = False, confidence: float = CONFIDENCE) -> Shift | None:
    """Hodges-Lehmann shift ``new - base`` and its rank-based interval (None when a side is empty).

    ``log=True`` compares ``log(values)`` and returns relative changes
    (values must be > 0).
    """
    b = np.asarray(list(base), dtype=float)
    w = np.asarray(list(new), dtype=float)
    if b.size == 0 or w.size == 0:
        return None
    if log:
        b, w = np.log(np.maximum(b, 1.0)), np.log(np.maximum(w, 1.0))
    b, w = _thin(b, w)
    diffs = np.sort((w[None, :] - b[:, None]).ravel())
    est = float(np.median(diffs))
    c = _interval_rank(b.size, w.size, confidence)
    low = high = None
    if c >= 1:
        low, high = float(diffs[c - 1]), float(diffs[diffs.size - c])
    if log:
        est = math.expm1(est)
        low = None if low is None else math.expm1(low)
        high = None if high is None else math.expm1(high)
    return Shift(estimate=est, low=low, high=high, confidence=confidence, base_count=int(b.size),
                 new_count=int(w.size))


def _thin(b: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Evenly spaced order statistics of each side when ``b.size * w.size`` exceeds ``_MAX_PAIRS``."""
    if b.size * w.size <= _MAX_PAIRS:
        return b, w
    keep = math.sqrt(_MAX_PAIRS / (b.size * w.size))

    def pick(v: np.ndarray) -> np.ndarray:
        k = max(int(v.size * keep), 1)
        return np.sort(v)[np.linspace(0, v.size - 1, k).round().astype(int)]

    return pick(b), pick(w)


def _pct(x: float) -> str:
    return f"{abs(x) * 100:.{1 if abs(x) < 0.1 else 0}f}%"


def relative_verdict(base, new, confidence: float = CONFIDENCE, min_change: float = MIN_CHANGE) -> Verdict:
    """The verdict on step times ``base`` vs ``new`` (ns), with a plain sentence.

    Slower (faster) needs the interval above (below) zero and the estimate beyond ``min_change``.
    """
    base, new = list(base), list(new)
    s = shift(base, new, log=True, confidence=confidence)
    m, n = len(base), len(new)  # the steps measured (the shift may have thinned long runs)
    steps = f"{m} vs {n} steps"
    if s is None or min(m, n) < MIN_STEPS or s.low is None:
        change = None if s is None else round(100 * s.estimate, 3)
        sentence = (f"inconclusive: {steps}; record at least {MIN_STEPS} steps per run for a verdict, "
                    f"{RECOMMENDED_STEPS} or more to resolve a few percent (the default window of mlprof run, "
                    f"--active auto, records {RECOMMENDED_STEPS} or more)")
        if change is not None:
            sentence += f"; point estimate {change:+.1f}%"
        return Verdict("inconclusive", change, None, None, confidence, m, n, sentence,
                       margin_pct=round(100 * min_change, 3))
    level = f"{confidence * 100:g}% CI"
    if (s.low > 0 or s.high < 0) and abs(s.estimate) < min_change:
        verdict = "no change"
        sentence = (f"no change beyond the {100 * min_change:g}% margin: {100 * s.estimate:+.1f}% "
                    f"({level} {100 * s.low:+.1f}%..{100 * s.high:+.1f}%, {steps}); runs of the same code "
                    "differ this much")
    elif s.low > 0:
        verdict = "slower"
        sentence = f"NEW is {_pct(s.estimate)} slower ({level} {_pct(s.low)}-{_pct(s.high)}, {steps})"
    elif s.high < 0:
        verdict = "faster"
        # A faster run's figures read as time saved: the interval's ends swap.
        sentence = f"NEW is {_pct(s.estimate)} faster ({level} {_pct(s.high)}-{_pct(s.low)}, {steps})"
    else:
        verdict = "no change"
        sentence = (f"no change beyond noise: {100 * s.estimate:+.1f}% "
                    f"({level} {100 * s.low:+.1f}%..{100 * s.high:+.1f}%, {steps})")
    return Verdict(verdict, round(100 * s.estimate, 3), round(100 * s.low, 3), round(100 * s.high, 3),
                   confidence, m, n, sentence, margin_pct=round(100 * min_change, 3))
