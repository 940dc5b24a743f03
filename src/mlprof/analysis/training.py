"""Training scalars next to the profile: loss, learning rate and throughput per step.

Pure functions over the ``scalars`` table (and ``steps`` for step time).
Throughput is any scalar whose name ends in ``_per_second`` (the
integrations' ``samples_per_second`` and ``tokens_per_second``, the Hugging
Face Trainer's ``train_samples_per_second``, a user's own), higher is better.
"""

from __future__ import annotations

from mlprof.tables.store import TableStore

__all__ = ["THROUGHPUT_SUFFIX", "is_throughput", "scalar_rows", "metrics_by_step", "throughput_by_step"]

THROUGHPUT_SUFFIX = "_per_second"


def is_throughput(name: str) -> bool:
    return name.endswith(THROUGHPUT_SUFFIX)


def scalar_rows(store: TableStore, step: int | None = None) -> list[dict]:
    """Every logged value in logging order (training_metrics.csv)."""
    cond, params = ("WHERE step = ?", [step]) if step is not None else ("", [])
    return store.dicts(f"SELECT step, name, value, source, ts_ns FROM scalars {cond} ORDER BY ts_ns, name", params)


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
