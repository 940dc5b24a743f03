"""GPU utilisation, SM efficiency and achieved occupancy over the profiled steps.

The three figures of the TensorBoard PyTorch profiler's GPU summary, from the
tables only, each None when the trace lacks what it needs:

* utilisation: share of step time the device view of the attribution is busy
  (kernels, copies, sets, communication);
* SM efficiency: kernel time weighted by ``min(blocks / SMs, 1)``, the share
  of the device's SMs a kernel's grid can occupy (Kineto's "blocks per SM"),
  over step time; needs launch grids and the device's SM count
  (``deviceProperties.numSms``);
* achieved occupancy: kernel-time-weighted mean of the trace's estimated
  achieved occupancy (``device_ops.occupancy_pct``);
* Tensor Core use: the share of kernel time in kernels that run on the
  matrix units (Tensor Cores, AMD's Matrix Cores), known by their names
  (``tables.names.TENSOR_CORE_KERNEL_REGEX``), as the TensorBoard plugin's
  "kernel time using Tensor Cores".
"""

from __future__ import annotations


from mlprof.tables.names import tensor_core_kernel_sql
from mlprof.tables.store import TableStore

__all__ = ["gpu_metrics"]


def _sm_counts(store: TableStore) -> dict[int, int]:
    out: dict[int, int] = {}
    for props in store.meta_values("deviceProperties"):
        for p in props if isinstance(props, list) else []:
            if isinstance(p, dict) and isinstance(p.get("id"), int) and isinstance(p.get("numSms"), int) \
                    and p["numSms"] > 0:
                out[p["id"]] = p["numSms"]
    return out


def gpu_metrics(store: TableStore, step: int | None = None) -> dict | None:
    """``{utilization, sm_efficiency, achieved_occupancy_pct, tensor_core_share, step_ns}`` (fractions), None
    without device work."""
    cond, params = ("", []) if step is None else (" AND step = ?", [step])
    total, busy = store.rows(f"""SELECT sum(dur_ns), sum(dur_ns) FILTER (WHERE phase <> 'idle') FROM phase_spans
                                 WHERE view = 'device'{cond}""", params)[0]
    if not total:
        return None
    sms = _sm_counts(store)
    sm_eff = None
    if sms:
        store.temp_table("_sm_counts", "device INTEGER, sms BIGINT", list(sms.items()))
        # grid is JSON text "[x, y, z]": blocks = x * y * z. Kernels on several streams overlap:
        # at each instant the SMs in use are capped at all of them, so sweep the starts and ends.
        # The weights are summed as decimals: sums of doubles depend on the order DuckDB's threads
        # add them in, and the last digits changed from run to run.
        weighted, devices = store.rows(f"""
            WITH k AS (SELECT d.device, greatest(d.start_ns, st.start_ns) AS start_ns,
                              least(d.start_ns + d.dur_ns, st.end_ns) AS end_ns,
                              CAST(least(1.0, list_product(g) / s.sms) AS DECIMAL(38, 18)) AS w
                       FROM (SELECT *, from_json(grid, '["BIGINT"]') AS g FROM device_ops) d
                       JOIN _sm_counts s ON s.device = d.device
                       -- clipped to the steps, as the attribution's device view is
                       JOIN steps st ON d.start_ns < st.end_ns AND d.start_ns + d.dur_ns > st.start_ns
                       WHERE d.kind = 'kernel' AND len(d.g) > 0{cond.replace('step', 'st.step')}),
            ev AS (SELECT device, start_ns AS t, w FROM k UNION ALL SELECT device, end_ns, -w FROM k),
            agg AS (SELECT device, t, sum(w) AS dw FROM ev GROUP BY device, t),
            run AS (SELECT device, t, sum(dw) OVER (PARTITION BY device ORDER BY t) AS level,
                           lead(t) OVER (PARTITION BY device ORDER BY t) AS t_next FROM agg)
            SELECT sum(least(1.0, level) * (t_next - t)) FILTER (WHERE level > 1e-9), count(DISTINCT device)
            FROM run WHERE t_next IS NOT NULL""", params)[0]
        weighted = None if not devices or weighted is None else weighted / devices
        sm_eff = None if weighted is None else float(weighted) / total
    # Decimal too: a sum of doubles changes with the order it is added in.
    occ = store.rows(f"""SELECT sum(CAST(occupancy_pct AS DECIMAL(38, 12)) * dur_ns) / nullif(sum(dur_ns), 0)
                         FROM device_ops
                         WHERE kind = 'kernel' AND occupancy_pct IS NOT NULL AND step IS NOT NULL{cond}""",
                     params)[0][0]
    tensor, kernels = store.rows(f"""SELECT sum(dur_ns) FILTER (WHERE {tensor_core_kernel_sql()}), sum(dur_ns)
                                     FROM device_ops WHERE kind = 'kernel' AND step IS NOT NULL{cond}""", params)[0]
    return {"step_ns": int(total), "utilization": int(busy or 0) / total, "sm_efficiency": sm_eff,
            "achieved_occupancy_pct": None if occ is None else float(occ),
            "tensor_core_share": int(tensor or 0) / kernels if kernels else None}
