"""Training scalars next to the profile: loss, learning rate and throughput per step.

Pure functions over the ``scalars`` table (and ``steps`` for step time).
Throughput is any scalar whose name ends in ``_per_second`` (the
integrations' ``samples_per_second`` and ``tokens_per_second``, the Hugging
Face Trainer's ``train_samples_per_second``, a user's own), higher is better.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mlprof.analysis.stats import MIN_STEPS, shift
from mlprof.tables.store import TableStore

__all__ = ["THROUGHPUT_SUFFIX", "is_throughput", "scalar_rows", "metrics_by_step", "throughput_by_step",
           "RateChange", "throughput_changes"]

THROUGHPUT_SUFFIX = "_per_second"


def is_throughput(name: str) -> bool:
    return name.endswith(THROUGHPUT_SUFFIX)


def scalar_rows(store: TableStore, step: int | None = None) -> list[dict]:
    """Every logged value in logging order (training_metrics.csv)."""
    cond, params = ("WHERE step = ?", [step]) if step is not None else ("", [])
    return store.dicts(f"SELECT step, name, value, source, ts_ns FROM scalars {cond} "
                       "ORDER BY ts_ns, name, step, source, value", params)


def metrics_by_step(store: TableStore) -> list[dict]:
    """One row per step that has a scalar or a profiled step time: ``step``, ``dur_ns``
    (NULL outside the profiled windows) and ``metrics`` {name: the step's last value}.

    What a dashboard draws as loss and throughput per step next to step time.
    """
    rows = store.rows("""
        WITH last AS (
            SELECT step, name, arg_max(value, ts_ns) AS value FROM scalars WHERE step IS NOT NULL GROUP BY ALL),
        dur AS (SELECT step, max(dur_ns) AS dur_ns FROM steps GROUP BY step)
        SELECT coalesce(l.step, d.step) AS step, d.dur_ns, l.name, l.value
        FROM last l FULL OUTER JOIN dur d ON d.step = l.step
        ORDER BY 1, 3""")
    out: dict[int, dict] = {}
    for step, dur_ns, name, value in rows:
        row = out.setdefault(step, {"step": step, "dur_ns": dur_ns, "metrics": {}})
        if name is not None:
            row["metrics"][name] = value
    return list(out.values())


def throughput_by_step(store: TableStore) -> dict[str, dict[int, float]]:
    """Throughput scalars: name -> {step: value} (the step's last value; steps without a number left out)."""
    out: dict[str, dict[int, float]] = {}
    for name, step, value in store.rows(f"""
            SELECT name, step, arg_max(value, ts_ns) FROM scalars
            WHERE step IS NOT NULL AND value IS NOT NULL AND ends_with(name, '{THROUGHPUT_SUFFIX}')
            GROUP BY name, step ORDER BY name, step"""):
        out.setdefault(name, {})[step] = value
    return out


@dataclass(frozen=True)
class RateChange:
    """One throughput scalar in two runs (higher is better): medians per step and the relative change.

    ``change_pct`` is the Hodges-Lehmann estimate of NEW's relative change
    (> 0: more throughput), ``low_pct``/``high_pct`` its confidence interval
    (None with too few steps), as for step time in :mod:`mlprof.analysis.stats`.
    """

    name: str
    base_median: float
    new_median: float
    base_mean: float
    new_mean: float
    base_steps: int
    new_steps: int
    aligned_by: str  # "step number" (the steps both runs logged) or "all steps"
    change_pct: float | None
    low_pct: float | None
    high_pct: float | None
    verdict: str  # "more", "less", "no change" or "inconclusive"


def throughput_changes(base: TableStore, new: TableStore) -> list[RateChange]:
    """Every throughput scalar both runs logged, compared (``mlprof compare``)."""
    b_all, n_all = throughput_by_step(base), throughput_by_step(new)
    out = []
    for name in sorted(b_all.keys() & n_all.keys()):
        b, n = b_all[name], n_all[name]
        common = sorted(b.keys() & n.keys())
        if common and len(common) * 2 >= min(len(b), len(n)):
            bv, nv, aligned = [b[s] for s in common], [n[s] for s in common], "step number"
        else:
            bv, nv, aligned = list(b.values()), list(n.values()), "all steps"
        bv, nv = [v for v in bv if v > 0], [v for v in nv if v > 0]
        if not bv or not nv:
            continue
        # Relative change on a log scale; scaled so that no rate is clamped by stats.shift's floor of 1.
        s = shift([v * 1e9 for v in bv], [v * 1e9 for v in nv], log=True)
        low = high = None
        verdict = "inconclusive"
        if s is not None and s.low is not None and min(len(bv), len(nv)) >= MIN_STEPS:
            low, high = round(100 * s.low, 3), round(100 * s.high, 3)
            verdict = "more" if s.low > 0 else "less" if s.high < 0 else "no change"
        out.append(RateChange(name, float(np.median(bv)), float(np.median(nv)), float(np.mean(bv)),
                              float(np.mean(nv)), len(bv), len(nv), aligned,
                              None if s is None else round(100 * s.estimate, 3), low, high, verdict))
    return out
