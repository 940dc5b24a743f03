"""Memory analyses: allocator totals over time, and allocations per op."""

from __future__ import annotations

from collections.abc import Iterator

from mlprof.tables.store import TableStore

__all__ = ["memory_record", "operator_memory", "memory_timeline", "memory_peaks", "MEMORY_PAIRS_SQL",
           "LIFETIME_SQL"]

# Memory events ``ev`` with the next event of the same block (next_size, next_ts): an allocation is released
# by the free that follows it. The one definition of that pairing (allocations, operator_memory).
MEMORY_PAIRS_SQL = """WITH ev AS (
            SELECT *, lead(size_bytes) OVER w AS next_size, lead(ts_ns) OVER w AS next_ts
            FROM memory_events
            WINDOW w AS (PARTITION BY window_index, device_type, device_id, addr ORDER BY ts_ns))"""
# An allocation's lifetime (alias ``a`` of ev), NULL when the trace does not free it.
LIFETIME_SQL = "CASE WHEN a.next_size < 0 THEN a.next_ts - a.ts_ns END"


def memory_record(store: TableStore, step: int | None = None, stream: bool = False) -> list[dict] | Iterator[dict]:
    """Allocator totals after every event (``stream``: rows fetched as they are read, :meth:`TableStore.iter_dicts`)."""
    cond = "" if step is None else "WHERE step = ?"
    # Events at one ns (on several devices, a block freed as another is allocated) need an order of
    # their own: DuckDB's sort is not stable on large inputs, so ties came out differently run to run.
    return (store.iter_dicts if stream else store.dicts)(f"""
        SELECT ts_ns, device_type, device_id, total_allocated_bytes, total_reserved_bytes
        FROM memory_events {cond} ORDER BY ts_ns, window_index, device_type, device_id, addr, size_bytes""",
        [] if step is None else [step])


def operator_memory(store: TableStore, step: int | None = None, stream: bool = False) -> list[dict] | Iterator[dict]:
    """Allocations paired with the next free of the same block (``stream``: as :func:`memory_record`)."""
    cond = "" if step is None else "AND a.step = ?"
    return (store.iter_dicts if stream else store.dicts)(f"""
        {MEMORY_PAIRS_SQL}
        SELECT h.name AS op_name, a.size_bytes, a.ts_ns AS alloc_ns,
               CASE WHEN a.next_size < 0 THEN a.next_ts END AS release_ns,
               {LIFETIME_SQL} AS lifetime_ns,
               a.device_type, a.device_id
        FROM ev a LEFT JOIN host_ops h ON h.op_id = a.host_op_id
        WHERE a.size_bytes > 0 {cond}
        ORDER BY a.ts_ns, a.window_index, a.device_type, a.device_id, a.addr""",
        [] if step is None else [step])


def _where(step: int | None, device: tuple[int, int] | None) -> tuple[str, list]:
    cond, params = ("", []) if step is None else (" AND step = ?", [step])
    if device is not None:
        cond += " AND coalesce(device_type, -1) = ? AND coalesce(device_id, -1) = ?"
        params += list(device)
    return cond, params


def memory_timeline(store: TableStore, step: int | None = None, device: tuple[int, int] | None = None,
                    points: int = 2_000) -> list[dict]:
    """Allocated and reserved bytes over time per device, at most about ``points`` rows per device (the
    largest of each time bucket). ``device``: (device_type, device_id), -1 for none."""
    cond, params = _where(step, device)
    lo, hi = store.rows(f"SELECT min(ts_ns), max(ts_ns) FROM memory_events WHERE total_allocated_bytes IS NOT NULL"
                        f"{cond}", params)[0]
    if lo is None:
        return []
    bucket = max(1, (hi - lo) // points + 1)
    return store.dicts(f"""SELECT device_type, device_id, min(ts_ns) AS ts_ns,
               max(total_allocated_bytes) AS allocated_bytes, max(total_reserved_bytes) AS reserved_bytes
        FROM memory_events WHERE total_allocated_bytes IS NOT NULL{cond}
        GROUP BY device_type, device_id, (ts_ns - {lo}) // {bucket} ORDER BY device_type, device_id, ts_ns""", params)


def memory_peaks(store: TableStore, step: int | None = None) -> list[dict]:
    """Per device: peak allocated bytes and when it was first reached, peak reserved, allocations and bytes."""
    cond, params = _where(step, None)
    # The peak's time is the first time it was reached: a steady run reaches it every step, and
    # arg_max gave whichever of those its threads met last.
    return store.dicts(f"""SELECT device_type, device_id, max(total_allocated_bytes) AS peak_allocated_bytes,
               arg_min(ts_ns, (-total_allocated_bytes, ts_ns)) FILTER (WHERE total_allocated_bytes IS NOT NULL)
               AS peak_ts_ns, max(total_reserved_bytes) AS peak_reserved_bytes,
               count(*) FILTER (WHERE size_bytes > 0) AS allocations, sum(size_bytes) FILTER (WHERE size_bytes > 0)
               AS allocated_bytes_total
        FROM memory_events WHERE true{cond} GROUP BY device_type, device_id ORDER BY 1, 2""", params)
