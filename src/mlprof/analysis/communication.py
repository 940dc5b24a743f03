"""Communication analyses over the ``collectives`` table (one rank's view)."""

from __future__ import annotations

import json

from mlprof.tables.store import TableStore

__all__ = ["rank_of", "communication_summary", "communication_matrix"]


def rank_of(store: TableStore) -> int | None:
    """The rank of the trace: mlprof's capture manifest, else Kineto's distributedInfo."""
    rank = store.meta("capture.rank")
    if isinstance(rank, int) and not isinstance(rank, bool):
        return rank
    info = store.meta("distributedInfo")
    if isinstance(info, dict) and isinstance(info.get("rank"), int):
        return info["rank"]
    return None


def communication_summary(store: TableStore, step: int | None = None) -> dict:
    """Per collective type and per op: count, time (ns), bytes and bandwidth (GB/s)."""
    cond, params = ("", []) if step is None else ("WHERE step = ?", [step])
    by_type = store.dicts(f"""
        SELECT collective_name, count(*) AS count, sum(dur_ns) AS total_ns,
               sum(size_bytes) AS total_bytes,
               sum(size_bytes) / nullif(sum(dur_ns), 0) AS bandwidth_gb_per_s
        FROM collectives {cond} GROUP BY collective_name ORDER BY total_ns DESC, collective_name""", params)
    ops = store.dicts(f"""
        SELECT step, name, collective_name, group_name, group_desc, group_ranks, group_size, dtype,
               in_nelems, out_nelems, size_bytes, device, stream, start_ns, dur_ns,
               size_bytes / nullif(dur_ns, 0) AS bandwidth_gb_per_s
        FROM collectives {cond} ORDER BY start_ns, device_op_id""", params)
    return {"rank": rank_of(store), "collectives": by_type, "ops": ops}


def communication_matrix(store: TableStore, step: int | None = None) -> list[dict]:
    """This rank's traffic per (collective, process group): bytes, time, bandwidth."""
    cond, params = ("", []) if step is None else ("WHERE step = ?", [step])
    rank = rank_of(store)
    rows = store.dicts(f"""
        SELECT collective_name, group_name, group_ranks, count(*) AS count,
               sum(size_bytes) AS size_bytes, sum(dur_ns) AS time_ns,
               sum(size_bytes) / nullif(sum(dur_ns), 0) AS bandwidth_gb_per_s
        FROM collectives {cond}
        GROUP BY collective_name, group_name, group_ranks ORDER BY collective_name, group_name, group_ranks""", params)
    for row in rows:
        row["src_rank"] = rank
        try:
            row["dst_ranks"] = json.loads(row.pop("group_ranks") or "null")
            if isinstance(row["dst_ranks"], str):
                row["dst_ranks"] = json.loads(row["dst_ranks"])
        except ValueError:
            row["dst_ranks"] = None
    return rows
