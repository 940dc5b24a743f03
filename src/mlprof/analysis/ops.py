"""Operator, kernel and runtime-API statistics over the parsed tables.

Host times are self times (children excluded) unless named total, with
torch's folding of nested same-name calls (see ``host_ops.folded``); device time
of an op is the time of the device ops its runtime calls launched: ``self``
for calls made directly by the op, ``total`` for calls made by it or any op
nested in it. All times in ns.
"""

from __future__ import annotations

import numpy as np

from mlprof.tables.names import step_span_sql, tensor_core_kernel_sql
from mlprof.tables.store import TableStore

__all__ = ["op_statistic", "operator_details", "kernel_statistic", "api_statistic",
           "device_time_per_op", "HOST_OP_FILTER", "DEVICE_NS_PER_OP"]

# Ops that appear in op statistics: framework ops and record_function
# annotations, as torch's key_averages() counts them (python frames and
# folded nested duplicates excluded; their time is in the parent's).
HOST_OP_FILTER = "category IN ('cpu_op', 'user_annotation', 'Operator') AND NOT coalesce(folded, false)"


# CTE ``dev(host_op_id, device_ns)``: device time launched by each counted op.
# Work launched by a folded op (a nested same-name call) is its unfolded
# ancestor's, as its host self time is (key_averages() does the same).
DEVICE_NS_PER_OP = """
    WITH RECURSIVE dev_owner(op_id, owner_id) AS (
        SELECT op_id, op_id FROM host_ops WHERE NOT coalesce(folded, false)
        UNION ALL
        SELECT h.op_id, o.owner_id FROM host_ops h JOIN dev_owner o ON h.parent_op_id = o.op_id
        WHERE coalesce(h.folded, false)),
    dev AS (SELECT coalesce(o.owner_id, d.host_op_id) AS host_op_id, sum(d.dur_ns) AS device_ns
            FROM device_ops d LEFT JOIN dev_owner o ON o.op_id = d.host_op_id
            WHERE d.host_op_id IS NOT NULL AND d.kind IN ('kernel', 'memcpy', 'memset') GROUP BY 1)"""


# key_averages() shows every ProfilerStep#N span as one "ProfilerStep*" row.
STEP_FOLD = f"CASE WHEN {step_span_sql('h.name')} THEN 'ProfilerStep*' ELSE h.name END"


def device_time_per_op(store: TableStore) -> tuple[dict[int, int], dict[int, int]]:
    """(self, total) device ns per host op_id, for ops that launched device work."""
    self_ns = dict(store.rows(DEVICE_NS_PER_OP + " SELECT host_op_id, device_ns FROM dev"))
    if not self_ns:
        return {}, {}
    tree = store.sql("SELECT op_id, parent_op_id FROM host_ops WHERE parent_op_id IS NOT NULL").fetchnumpy()
    parent = dict(zip(np.asarray(tree["op_id"]).tolist(), np.asarray(tree["parent_op_id"]).tolist()))
    total: dict[int, int] = {}
    for op, ns in self_ns.items():
        node = op
        while node is not None:
            total[node] = total.get(node, 0) + ns
            node = parent.get(node)
    return self_ns, total


def _with_device_times(store: TableStore) -> None:
    self_ns, total = device_time_per_op(store)
    store.con.execute("DROP TABLE IF EXISTS _op_device")
    store.con.execute("CREATE TEMP TABLE _op_device (op_id BIGINT, device_self_ns BIGINT, device_total_ns BIGINT)")
    if total:
        ids = np.fromiter(total, dtype=np.int64, count=len(total))
        frame = {"op_id": ids,
                 "device_self_ns": np.array([self_ns.get(i, 0) for i in ids.tolist()], dtype=np.int64),
                 "device_total_ns": np.array([total[i] for i in ids.tolist()], dtype=np.int64)}
        store.con.register("_op_device_src", frame)
        store.con.execute("INSERT INTO _op_device SELECT * FROM _op_device_src")
        store.con.unregister("_op_device_src")


def _step_filter(step: int | None, alias: str = "") -> tuple[str, list]:
    if step is None:
        return "", []
    return f" AND {alias}step = ?", [step]


def op_statistic(store: TableStore, step: int | None = None) -> list[dict]:
    """Per op name: count, host self/total time, device time, ratio of host self time."""
    _with_device_times(store)
    cond, params = _step_filter(step, "h.")
    return store.dicts(f"""
        SELECT {STEP_FOLD} AS name, count(*) AS count,
               sum(h.folded_self_ns) AS host_self_ns, sum(h.dur_ns) AS host_total_ns,
               avg(h.folded_self_ns) AS avg_self_ns, min(h.folded_self_ns) AS min_self_ns,
               max(h.folded_self_ns) AS max_self_ns,
               coalesce(sum(d.device_self_ns), 0) AS device_self_ns,
               coalesce(sum(d.device_total_ns), 0) AS device_total_ns,
               100.0 * sum(h.folded_self_ns) / nullif(sum(sum(h.folded_self_ns)) OVER (), 0) AS ratio_pct
        FROM host_ops h LEFT JOIN _op_device d USING (op_id)
        WHERE h.{HOST_OP_FILTER} {cond}
        GROUP BY 1 ORDER BY host_self_ns DESC, 1""", params)


def operator_details(store: TableStore, step: int | None = None) -> list[dict]:
    """Per op name and input shapes: count and host/device self/total time."""
    _with_device_times(store)
    cond, params = _step_filter(step, "h.")
    return store.dicts(f"""
        SELECT h.name, h.input_dims, h.input_types, count(*) AS count,
               sum(h.folded_self_ns) AS host_self_ns, sum(h.dur_ns) AS host_total_ns,
               coalesce(sum(d.device_self_ns), 0) AS device_self_ns,
               coalesce(sum(d.device_total_ns), 0) AS device_total_ns
        FROM host_ops h LEFT JOIN _op_device d USING (op_id)
        WHERE h.{HOST_OP_FILTER} {cond}
        GROUP BY h.name, h.input_dims, h.input_types
        ORDER BY host_total_ns DESC, h.name, h.input_dims, h.input_types""", params)


def kernel_statistic(store: TableStore, step: int | None = None) -> list[dict]:
    """Per device op name and kind: count, total/avg/min/max time, ratio of device time, and whether it runs
    on the Tensor Cores (a kernel named as one, ``tables.names.TENSOR_CORE_KERNEL_REGEX``)."""
    cond, params = _step_filter(step)
    return store.dicts(f"""
        SELECT name, kind, count(*) AS count, sum(dur_ns) AS total_ns, avg(dur_ns) AS avg_ns,
               min(dur_ns) AS min_ns, max(dur_ns) AS max_ns,
               100.0 * sum(dur_ns) / nullif(sum(sum(dur_ns)) OVER (), 0) AS ratio_pct,
               kind = 'kernel' AND {tensor_core_kernel_sql()} AS tensor_cores
        FROM device_ops WHERE kind <> 'sync' {cond}
        GROUP BY name, kind ORDER BY total_ns DESC, name, kind""", params)


def api_statistic(store: TableStore, step: int | None = None) -> list[dict]:
    """Per runtime API: count, total/avg/min/max time, ratio of API time."""
    cond, params = _step_filter(step)
    return store.dicts(f"""
        SELECT name, count(*) AS count, sum(dur_ns) AS total_ns, avg(dur_ns) AS avg_ns,
               min(dur_ns) AS min_ns, max(dur_ns) AS max_ns,
               100.0 * sum(dur_ns) / nullif(sum(sum(dur_ns)) OVER (), 0) AS ratio_pct
        FROM runtime_calls WHERE true {cond}
        GROUP BY name ORDER BY total_ns DESC, name""", params)
