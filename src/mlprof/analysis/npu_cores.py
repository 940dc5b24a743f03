"""Ascend NPU time by compute unit, and what each unit's pipes were busy with.

An Ascend NPU runs an op on one of several units (kernel_details.csv's
``Accelerator Core``): the AI Core's cube unit (matrix multiply: AI_CORE,
MIX_AIC), its vector unit (AI_VECTOR_CORE, MIX_AIV), the general-purpose AI
CPU (slow: an op there is usually one with no AI Core kernel), the HCCL
collective engine and DMA engines. MindInsight's operator page and
msprof-analyze's advisor start from the same split. With PMU counters
(profiler Level1/Level2: ``aic_mac_ratio``, ``aiv_vec_ratio``, ...) each
unit's time is split further by pipe: ``mac``/``vec`` compute, ``scalar``
control, ``mte1``/``mte2``/``mte3`` memory transfers, ``fixpipe`` the cube's
output path. A unit whose memory-transfer pipes are busier than its compute
pipe is waiting on memory, not computing.

A pipe's share is its ratio averaged over the unit's ops, each weighted by
the unit's own busy time on that op (``aicore_time``/``aic_total_time``,
``aiv_time``/``aiv_total_time``; the op's duration where the tool wrote no
busy time): the share of the unit's time the pipe was busy, summed over ops
as the tool's per-op ratios are meant. Empty for runs that are not Ascend
imports. Pure SQL over ``device_ops``, ``device_op_details`` and
``device_op_metrics``.
"""

from __future__ import annotations

from mlprof.tables.store import TableStore

__all__ = ["npu_core_split", "COMPUTE_PIPES", "MEMORY_PIPES"]

# Pipe names as the counters spell them (aic_<pipe>_ratio, aiv_<pipe>_ratio).
COMPUTE_PIPES = ("mac", "vec")
MEMORY_PIPES = ("mte1", "mte2", "mte3")

_BUSY_TIME = {"aicore_time": "aic", "aic_total_time": "aic", "aiv_time": "aiv", "aiv_total_time": "aiv"}


def npu_core_split(store: TableStore, step: int | None = None) -> list[dict]:
    """One row per accelerator core, most device time first: ``core``, ``ops`` (count), ``op_types``,
    ``total_ns``, ``ratio_pct`` (of the device time of all NPU tasks), ``avg_ns``, ``top_op_type`` (the op
    type with the most time there), ``pipes`` (``[{unit, pipe, share}]``, busiest first; empty without PMU
    counters) and ``bound`` (``compute`` or ``memory``: which kind of pipe was busier; None without counters).
    ``step`` limits it to one step."""
    cond, params = ("AND d.step = ?", [step]) if step is not None else ("", [])
    cores = store.dicts(f"""
        WITH t AS (
            SELECT coalesce(x.accelerator_core, x.task_type, 'unknown') AS core, coalesce(x.op_type, d.name) AS op_type,
                   d.dur_ns
            FROM device_ops d JOIN device_op_details x USING (window_index, device_op_id)
            WHERE d.kind <> 'sync' {cond}),
        by_type AS (SELECT core, op_type, sum(dur_ns) AS type_ns FROM t GROUP BY ALL)
        SELECT t.core, count(*) AS ops, count(DISTINCT t.op_type) AS op_types, sum(t.dur_ns) AS total_ns,
               100.0 * sum(t.dur_ns) / nullif(sum(sum(t.dur_ns)) OVER (), 0) AS ratio_pct,
               avg(t.dur_ns) AS avg_ns,
               (SELECT arg_max(op_type, type_ns) FROM by_type b WHERE b.core = t.core) AS top_op_type
        FROM t GROUP BY t.core ORDER BY total_ns DESC, t.core""", params)
    if not cores:
        return []
    busy_cases = " ".join(f"WHEN '{name}' THEN '{unit}'" for name, unit in _BUSY_TIME.items())
    pipes = store.dicts(f"""
        WITH m AS (
            SELECT window_index, device_op_id, regexp_replace(metric, '\\(us\\)$', '') AS metric, value
            FROM device_op_metrics),
        ratios AS (
            SELECT window_index, device_op_id, regexp_extract(metric, '^(aic|aiv)_', 1) AS unit,
                   regexp_extract(metric, '^(?:aic|aiv)_([a-z0-9]+)_ratio$', 1) AS pipe, value
            FROM m WHERE regexp_matches(metric, '^(aic|aiv)_[a-z0-9]+_ratio$')),
        busy AS (
            SELECT window_index, device_op_id, CASE metric {busy_cases} END AS unit, value AS busy
            FROM m WHERE metric IN ({", ".join(f"'{name}'" for name in _BUSY_TIME)}))
        SELECT coalesce(x.accelerator_core, x.task_type, 'unknown') AS core, r.unit, r.pipe,
               sum(r.value * coalesce(b.busy, d.dur_ns)) / nullif(sum(coalesce(b.busy, d.dur_ns)), 0) AS share
        FROM ratios r
        JOIN device_ops d USING (window_index, device_op_id)
        JOIN device_op_details x USING (window_index, device_op_id)
        LEFT JOIN busy b USING (window_index, device_op_id, unit)
        WHERE d.kind <> 'sync' AND (b.busy IS NULL OR b.busy > 0) {cond}
        GROUP BY ALL HAVING share IS NOT NULL
        ORDER BY core, share DESC, r.unit, r.pipe""", params)
    by_core: dict[str, list[dict]] = {}
    for p in pipes:
        by_core.setdefault(p.pop("core"), []).append({**p, "share": round(p["share"], 4)})
    for row in cores:
        row["pipes"] = by_core.get(row["core"], [])
        row["bound"] = _bound(row["pipes"])
    return cores


def _bound(pipes: list[dict]) -> str | None:
    """``memory`` when the busiest memory-transfer pipe was busier than the busiest compute pipe, else
    ``compute``; None without both kinds of counter."""
    compute = max((p["share"] for p in pipes if p["pipe"] in COMPUTE_PIPES), default=None)
    memory = max((p["share"] for p in pipes if p["pipe"] in MEMORY_PIPES), default=None)
    if compute is None or memory is None:
        return None
    return "memory" if memory > compute else "compute"
