"""Every table and chart of the dashboard, as a named dataset over a TableStore.

Pages fetch ``/api/data/<name>?run=...`` and draw it; the same URL with
``format=csv`` or ``format=json`` is the download link of that chart or table,
so what is downloaded is exactly what is shown. Datasets only call analyses
and read tables; none of them reads raw files.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

from mlprof.analysis import api_statistic, kernel_statistic, op_statistic, operator_details, step_breakdown
from mlprof.analysis.steps import data_loading_spans
from mlprof.analysis.memory import operator_memory
from mlprof.errors import ConfigError
from mlprof.tables.store import TableStore

__all__ = ["Params", "Dataset", "DATASETS", "get_dataset", "MEMORY_POINTS"]

MEMORY_POINTS = 2_000  # memory timeline points per device (max per time bucket)
OP_CALLS_LIMIT = 500


@dataclass(frozen=True)
class Params:
    step: int | None = None
    name: str | None = None  # op or kernel name, for drill-downs
    input_dims: str | None = None


@dataclass(frozen=True)
class Dataset:
    name: str
    title: str
    fn: Callable[[TableStore, Params], list[dict]]


def _steps(store: TableStore, p: Params) -> list[dict]:
    rows = []
    for b in step_breakdown(store):
        row = {k: getattr(b, k) for k in b.field_names()}
        if p.step is None or row["step"] == p.step:
            rows.append(row)
    return rows


def _data_loading(store: TableStore, p: Params) -> list[dict]:
    return [{"window": r["window"], "step": r["step"], "step_ns": r["dur_ns"],
             "data_loading_ns": r["data_loading_ns"],
             "data_loading_pct": 100.0 * r["data_loading_ns"] / r["dur_ns"] if r["dur_ns"] else None}
            for r in _steps(store, p)]


def _data_loader_calls(store: TableStore, p: Params) -> list[dict]:
    return data_loading_spans(store, p.step)


def _operator_details(store: TableStore, p: Params) -> list[dict]:
    rows = operator_details(store, p.step)
    return [r for r in rows if p.name is None or r["name"] == p.name]


def _op_calls(store: TableStore, p: Params) -> list[dict]:
    """Single calls of one op (and input shapes), slowest first: the last drill-down level."""
    if p.name is None:
        raise ConfigError("op_calls needs name=")
    cond, params = "", [p.name]
    if p.input_dims is not None:
        cond += " AND input_dims IS NOT DISTINCT FROM ?"
        params.append(p.input_dims or None)
    if p.step is not None:
        cond += " AND step = ?"
        params.append(p.step)
    return store.dicts(f"""SELECT op_id, name, input_dims, step, tid, start_ns, dur_ns, folded_self_ns AS self_ns
        FROM host_ops WHERE name = ? AND category <> 'python_function' AND NOT coalesce(folded, false) {cond}
        ORDER BY dur_ns DESC LIMIT {OP_CALLS_LIMIT}""", params)


def _kernel_calls(store: TableStore, p: Params) -> list[dict]:
    if p.name is None:
        raise ConfigError("kernel_calls needs name=")
    cond, params = ("", [p.name]) if p.step is None else (" AND d.step = ?", [p.name, p.step])
    return store.dicts(f"""SELECT d.device_op_id, d.name, d.kind, d.device, d.stream, d.step, d.start_ns, d.dur_ns,
               d.grid, d.block, h.name AS host_op
        FROM device_ops d LEFT JOIN host_ops h ON h.op_id = d.host_op_id
        WHERE d.name = ? {cond} ORDER BY d.dur_ns DESC LIMIT {OP_CALLS_LIMIT}""", params)


def _memory_timeline(store: TableStore, p: Params) -> list[dict]:
    cond, params = ("", []) if p.step is None else (" AND step = ?", [p.step])
    lo, hi = store.rows(f"SELECT min(ts_ns), max(ts_ns) FROM memory_events WHERE total_allocated_bytes IS NOT NULL"
                        f"{cond}", params)[0]
    if lo is None:
        return []
    bucket = max(1, (hi - lo) // MEMORY_POINTS + 1)
    return store.dicts(f"""SELECT device_type, device_id, min(ts_ns) AS ts_ns,
               max(total_allocated_bytes) AS allocated_bytes, max(total_reserved_bytes) AS reserved_bytes
        FROM memory_events WHERE total_allocated_bytes IS NOT NULL{cond}
        GROUP BY device_type, device_id, (ts_ns - {lo}) // {bucket} ORDER BY device_type, device_id, ts_ns""", params)


def _memory_peak(store: TableStore, p: Params) -> list[dict]:
    cond, params = ("", []) if p.step is None else (" AND step = ?", [p.step])
    return store.dicts(f"""SELECT device_type, device_id, max(total_allocated_bytes) AS peak_allocated_bytes,
               arg_max(ts_ns, total_allocated_bytes) AS peak_ts_ns, max(total_reserved_bytes) AS peak_reserved_bytes,
               count(*) FILTER (WHERE size_bytes > 0) AS allocations, sum(size_bytes) FILTER (WHERE size_bytes > 0)
               AS allocated_bytes_total
        FROM memory_events WHERE true{cond} GROUP BY device_type, device_id ORDER BY 1, 2""", params)


def _memory_by_op(store: TableStore, p: Params) -> list[dict]:
    """Allocations per op name: count, bytes, peak single allocation (the memory view's category split)."""
    rows = operator_memory(store, p.step)
    by_op: dict[str, dict] = {}
    for r in rows:
        agg = by_op.setdefault(r["op_name"] or "(no op)", {"op_name": r["op_name"] or "(no op)", "allocations": 0,
                                                          "size_bytes": 0, "max_size_bytes": 0})
        agg["allocations"] += 1
        agg["size_bytes"] += r["size_bytes"] or 0
        agg["max_size_bytes"] = max(agg["max_size_bytes"], r["size_bytes"] or 0)
    return sorted(by_op.values(), key=lambda r: -r["size_bytes"])


def _counters(store: TableStore, p: Params) -> list[dict]:
    """Counter samples (host/device samplers, trace 'C' events), max per time bucket per series."""
    lo, hi = store.rows("SELECT min(ts_ns), max(ts_ns) FROM counters")[0]
    if lo is None:
        return []
    bucket = max(1, (hi - lo) // MEMORY_POINTS + 1)
    return store.dicts(f"""SELECT name, series, pid, min(ts_ns) AS ts_ns, max(value) AS value FROM counters
        GROUP BY name, series, pid, (ts_ns - {lo}) // {bucket} ORDER BY name, series, pid, ts_ns""")


def _host_resources(store: TableStore, p: Params) -> list[dict]:
    from mlprof.analysis.host import host_resources  # the sampler's series, one row per sample time

    return host_resources(store, p.step)


def _environment(store: TableStore, p: Params) -> list[dict]:
    out = []
    for key, value in store.rows("SELECT key, value_json FROM metadata ORDER BY key"):
        try:
            decoded = json.loads(value)
        except ValueError:
            decoded = value
        text = decoded if isinstance(decoded, str) else json.dumps(decoded, sort_keys=True)
        out.append({"key": key, "value": text})
    return out


def _ops(fn):
    return lambda store, p: fn(store, p.step)


DATASETS: dict[str, Dataset] = {d.name: d for d in (
    Dataset("steps", "Step breakdown (ns)", _steps),
    Dataset("op_statistic", "Operators by name", _ops(op_statistic)),
    Dataset("operator_details", "Operators by name and input shapes", _operator_details),
    Dataset("op_calls", "Calls of one operator, slowest first", _op_calls),
    Dataset("kernel_statistic", "Device kernels and copies by name", _ops(kernel_statistic)),
    Dataset("kernel_calls", "Calls of one kernel, slowest first", _kernel_calls),
    Dataset("api_statistic", "Runtime API calls by name", _ops(api_statistic)),
    Dataset("data_loading", "Data loading time per step", _data_loading),
    Dataset("data_loader_calls", "DataLoader calls", _data_loader_calls),
    Dataset("memory_timeline", "Allocated and reserved memory over time (max per time bucket)", _memory_timeline),
    Dataset("memory_peak", "Memory peak per device", _memory_peak),
    Dataset("memory_by_op", "Allocations per operator", _memory_by_op),
    Dataset("operator_memory", "Allocations with their lifetimes", lambda s, p: operator_memory(s, p.step)),
    Dataset("host_resources", "Host CPU, memory, disk and network samples", _host_resources),
    Dataset("counters", "Counter samples over time (max per time bucket)", _counters),
    Dataset("environment", "Environment and trace metadata", _environment),
)}


def get_dataset(name: str) -> Dataset:
    try:
        return DATASETS[name]
    except KeyError:
        raise ConfigError(f"{name!r}: no such dataset") from None
