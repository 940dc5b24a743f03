"""Memory analyses: allocator totals over time, and allocations per op."""

from __future__ import annotations

from collections.abc import Iterator

from mlprof.tables.store import TableStore

__all__ = ["memory_record", "operator_memory"]


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
        WITH ev AS (
            SELECT *, lead(size_bytes) OVER w AS next_size, lead(ts_ns) OVER w AS next_ts
            FROM memory_events
            WINDOW w AS (PARTITION BY window_index, device_type, device_id, addr ORDER BY ts_ns))
        SELECT h.name AS op_name, a.size_bytes, a.ts_ns AS alloc_ns,
               CASE WHEN a.next_size < 0 THEN a.next_ts END AS release_ns,
               CASE WHEN a.next_size < 0 THEN a.next_ts - a.ts_ns END AS lifetime_ns,
               a.device_type, a.device_id
        FROM ev a LEFT JOIN host_ops h ON h.op_id = a.host_op_id
        WHERE a.size_bytes > 0 {cond}
        ORDER BY a.ts_ns, a.window_index, a.device_type, a.device_id, a.addr""",
        [] if step is None else [step])
