"""The last level of a drill-down: single calls of one op or kernel, single allocations in a time range,
counter samples in time buckets, and the names that are annotations rather than ops.

Each returns plain rows; the ones that can be long are cut at ``limit`` rows and say how many there were
(``(rows, total)``), so a page never fetches a million calls to show the slowest 500.
"""

from __future__ import annotations

from mlprof.analysis.memory import LIFETIME_SQL, MEMORY_PAIRS_SQL
from mlprof.tables.store import TableStore

__all__ = ["op_calls", "kernel_calls", "allocations", "counter_buckets", "annotation_names", "ANY_SHAPES"]

# ``input_dims`` of op_calls when every shape is wanted (None is a shape: the op's calls without recorded ones).
ANY_SHAPES = object()


def _limited(store: TableStore, query: str, params: list, limit: int) -> tuple[list[dict], int]:
    total = store.rows(f"SELECT count(*) FROM ({query})", params)[0][0]
    return store.dicts(f"{query} LIMIT {int(limit)}", params), int(total)


def op_calls(store: TableStore, name: str, limit: int, input_dims: object = ANY_SHAPES,
             step: int | None = None) -> tuple[list[dict], int]:
    """Single calls of op ``name`` (with ``input_dims``, None or "" for calls without shapes), slowest first."""
    cond, params = "", [name]
    if input_dims is not ANY_SHAPES:
        cond += " AND input_dims IS NOT DISTINCT FROM ?"
        params.append(input_dims or None)
    if step is not None:
        cond += " AND step = ?"
        params.append(step)
    return _limited(store, f"""SELECT op_id, name, input_dims, step, tid, start_ns, dur_ns, folded_self_ns AS self_ns
        FROM host_ops WHERE name = ? AND category <> 'python_function' AND NOT coalesce(folded, false) {cond}
        ORDER BY dur_ns DESC, op_id""", params, limit)


def kernel_calls(store: TableStore, name: str, limit: int, step: int | None = None) -> tuple[list[dict], int]:
    """Single runs of device task ``name`` with the host op that launched each, slowest first."""
    cond, params = ("", [name]) if step is None else (" AND d.step = ?", [name, step])
    return _limited(store, f"""SELECT d.device_op_id, d.name, d.kind, d.device, d.stream, d.step, d.start_ns,
               d.dur_ns, d.grid, d.block, d.occupancy_pct, h.op_id AS host_op_id, h.name AS host_op
        FROM device_ops d LEFT JOIN host_ops h ON h.op_id = d.host_op_id
        WHERE d.name = ? {cond} ORDER BY d.dur_ns DESC, d.device_op_id""", params, limit)


def allocations(store: TableStore, limit: int, step: int | None = None, device: tuple[int, int] | None = None,
                t0_ns: int | None = None, t1_ns: int | None = None) -> tuple[list[dict], int]:
    """Allocations (with their op and lifetime) made in [t0, t1) on ``device`` ((type, id); -1 for none),
    largest first."""
    cond, params = "", []
    if step is not None:
        cond, params = " AND a.step = ?", [step]
    if device is not None:
        cond += " AND coalesce(a.device_type, -1) = ? AND coalesce(a.device_id, -1) = ?"
        params += list(device)
    if t0_ns is not None:
        cond, params = cond + " AND a.ts_ns >= ?", params + [t0_ns]
    if t1_ns is not None:
        cond, params = cond + " AND a.ts_ns < ?", params + [t1_ns]
    return _limited(store, f"""
        {MEMORY_PAIRS_SQL}
        SELECT coalesce(h.name, '(no op)') AS op_name, a.size_bytes, a.ts_ns AS alloc_ns,
               {LIFETIME_SQL} AS lifetime_ns,
               a.step, h.op_id AS host_op_id, a.total_allocated_bytes
        FROM ev a LEFT JOIN host_ops h ON h.op_id = a.host_op_id
        WHERE a.size_bytes > 0{cond}
        ORDER BY a.size_bytes DESC, a.ts_ns, a.window_index, a.device_type, a.device_id, a.addr""", params, limit)


def counter_buckets(store: TableStore, points: int, leave_out: set[str] | frozenset[str] = frozenset()) -> list[dict]:
    """Counter samples (host and device samplers, trace 'C' events) as the largest value per series in each of
    ``points`` time buckets over the run; series named in ``leave_out`` (identifiers, not quantities) left out."""
    lo, hi = store.rows("SELECT min(ts_ns), max(ts_ns) FROM counters")[0]
    if lo is None:
        return []
    bucket = max(1, (hi - lo) // points + 1)
    skip = sorted(leave_out)
    where = f"WHERE series NOT IN ({', '.join('?' * len(skip))})" if skip else ""
    return store.dicts(f"""SELECT name, series, pid, min(ts_ns) AS ts_ns, max(value) AS value FROM counters {where}
        GROUP BY name, series, pid, (ts_ns - {int(lo)}) // {int(bucket)} ORDER BY name, series, pid, ts_ns""", skip)


def annotation_names(store: TableStore) -> set[str]:
    """Names of record_function annotations (user ranges, ProfilerStep): host ops whose self time is the
    Python between the ops they enclose, not an operator's work."""
    return {n for (n,) in store.rows("SELECT DISTINCT name FROM host_ops WHERE category = 'user_annotation'")}
