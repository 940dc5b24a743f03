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
from mlprof.analysis import drilldowns
from mlprof.analysis.call_sites import call_sites
from mlprof.analysis.drilldowns import ANY_SHAPES
from mlprof.analysis.modules import module_steps, module_tree
from mlprof.analysis.monitor import job_step_series, monitor_overview
from mlprof.analysis.npu_cores import npu_core_split
from mlprof.analysis.op_call_sites import op_call_sites
from mlprof.analysis.step_categories import step_categories
from mlprof.analysis.training import metrics_by_step
from mlprof.analysis.steps import data_loading_spans
from mlprof.analysis.memory import memory_peaks, memory_timeline, operator_memory
from mlprof.errors import ConfigError
from mlprof.tables.store import TableStore
from mlprof.ui.labels import ID_SERIES, counter_display, device_label

__all__ = ["Params", "Dataset", "DATASETS", "get_dataset", "MEMORY_POINTS", "LimitedRows", "ROW_LIMIT"]

MEMORY_POINTS = 2_000  # memory timeline points per device (max per time bucket)
ROW_LIMIT = 500  # drill-down rows (single calls, allocations); the answer says how many there were


class LimitedRows(list):
    """Rows cut at a limit; ``total`` is how many there were (sent as the X-Total-Rows header)."""

    def __init__(self, rows: list, total: int) -> None:
        super().__init__(rows)
        self.total = total


@dataclass(frozen=True)
class Params:
    step: int | None = None
    name: str | None = None  # op or kernel name, for drill-downs
    input_dims: str | None = None
    phase: str | None = None  # call sites of one host phase
    device: str | None = None  # memory: "device_type:device_id"
    t0: int | None = None  # memory: allocations made in [t0, t1), absolute ns
    t1: int | None = None


@dataclass(frozen=True)
class Dataset:
    name: str
    title: str
    fn: Callable[[TableStore, Params], list[dict]]
    # What its ``name=`` names where it needs one: "op" (an operator) or "kernel" (a device kernel).
    needs_name: str | None = None

    def rows(self, store: TableStore, params: Params) -> list[dict]:
        if self.needs_name and not params.name:
            raise ConfigError(f"{self.name} needs name= (the {self.needs_name}'s name)")
        return self.fn(store, params)


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


def _limited(found: tuple[list[dict], int]) -> LimitedRows:
    rows, total = found
    return LimitedRows(rows, total)


def _op_calls(store: TableStore, p: Params) -> list[dict]:
    """Single calls of one op (and input shapes), slowest first: the last drill-down level."""
    shapes = ANY_SHAPES if p.input_dims is None else p.input_dims
    return _limited(drilldowns.op_calls(store, p.name, ROW_LIMIT, shapes, p.step))


def _kernel_calls(store: TableStore, p: Params) -> list[dict]:
    return _limited(drilldowns.kernel_calls(store, p.name, ROW_LIMIT, p.step))


def _device_key(p: Params) -> tuple[int, int]:
    try:
        dtype, did = (int(x) for x in (p.device or "").split(":"))
    except ValueError:
        raise ConfigError(f"device={(p.device or '')[:40]!r}: expected TYPE:ID, e.g. 1:0") from None
    return dtype, did


def _memory_timeline(store: TableStore, p: Params) -> list[dict]:
    rows = memory_timeline(store, p.step, _device_key(p) if p.device else None, MEMORY_POINTS)
    return [{"device": device_label(r["device_type"], r["device_id"]), **r} for r in rows]


def _memory_peak(store: TableStore, p: Params) -> list[dict]:
    return [{"device": device_label(r["device_type"], r["device_id"]),
             "device_key": f"{r['device_type'] if r['device_type'] is not None else -1}:"
                           f"{r['device_id'] if r['device_id'] is not None else -1}", **r}
            for r in memory_peaks(store, p.step)]


def _allocations(store: TableStore, p: Params) -> list[dict]:
    """Allocations (with op and lifetime) made in [t0, t1) on one device, largest first."""
    return _limited(drilldowns.allocations(store, ROW_LIMIT, p.step, _device_key(p) if p.device else None,
                                           p.t0, p.t1))


def _memory_by_op(store: TableStore, p: Params) -> list[dict]:
    """Allocations per op name: count, bytes, peak single allocation (on one device, in [t0, t1) when given)."""
    rows = operator_memory(store, p.step)
    if p.device:
        dtype, did = _device_key(p)
        rows = [r for r in rows if (r["device_type"] if r["device_type"] is not None else -1) == dtype
                and (r["device_id"] if r["device_id"] is not None else -1) == did]
    rows = [r for r in rows if (p.t0 is None or r["alloc_ns"] >= p.t0) and (p.t1 is None or r["alloc_ns"] < p.t1)]
    by_op: dict[str, dict] = {}
    for r in rows:
        agg = by_op.setdefault(r["op_name"] or "(no op)", {"op_name": r["op_name"] or "(no op)", "allocations": 0,
                                                          "size_bytes": 0, "max_size_bytes": 0})
        agg["allocations"] += 1
        agg["size_bytes"] += r["size_bytes"] or 0
        agg["max_size_bytes"] = max(agg["max_size_bytes"], r["size_bytes"] or 0)
    return sorted(by_op.values(), key=lambda r: (-r["size_bytes"], r["op_name"]))


def _counters(store: TableStore, p: Params) -> list[dict]:
    """Counter samples (host/device samplers, trace 'C' events), max per time bucket per series."""
    rows = drilldowns.counter_buckets(store, MEMORY_POINTS, leave_out=set(ID_SERIES))
    values: dict[tuple, list] = {}
    for r in rows:
        values.setdefault((r["name"], r["series"]), []).append(r["value"])
    shown = {key: counter_display(*key, vals) for key, vals in values.items()}
    for r in rows:
        r["label"], r["unit"], factor = shown[(r["name"], r["series"])]
        if factor != 1.0 and r["value"] is not None:
            r["value"] *= factor
    return rows


def _host_resources(store: TableStore, p: Params) -> list[dict]:
    from mlprof.analysis.host import host_resources  # the sampler's series, one row per sample time

    return host_resources(store, p.step)


def _environment(store: TableStore, p: Params) -> list[dict]:
    return [{"key": key, "value": value if isinstance(value, str) else json.dumps(value, sort_keys=True)}
            for key, value in sorted(store.metadata().items())]


def _ops(fn):
    return lambda store, p: fn(store, p.step)


def _op_call_sites(store: TableStore, p: Params) -> list[dict]:
    """Where one op's calls came from (``name=``): each row says its ``source`` (traced: Kineto's Python frames;
    sampled: mlprof's stack sampler)."""
    found = op_call_sites(store, p.name, p.step)
    return [{**r, "source": found["source"]} for r in found["rows"]]


def _npu_cores(store: TableStore, p: Params) -> list[dict]:
    """npu_core_split with each pipe's share as a column of its own (``aic_mac``, ``aiv_vec``, ...: the share
    of that unit's busy time), so the rows stay flat for tables and CSV."""
    rows = []
    for r in npu_core_split(store, p.step):
        pipes = r.pop("pipes")
        rows.append({**r, **{f"{x['unit']}_{x['pipe']}": x["share"] for x in pipes}})
    return rows


def _op_statistic(store: TableStore, p: Params) -> list[dict]:
    """op_statistic with ``kind``: "annotation" (record_function ranges, ProfilerStep) or "op".

    An annotation's self time is the Python between the ops it encloses, not an
    operator's work: charts of operator time leave them out, the table marks them.
    """
    annotations = drilldowns.annotation_names(store)
    return [{**r, "kind": "annotation" if r["name"] in annotations or r["name"] == "ProfilerStep*" else "op"}
            for r in op_statistic(store, p.step)]


def _step_categories(store: TableStore, p: Params) -> list[dict]:
    return [r for r in step_categories(store) if p.step is None or r["step"] == p.step]


def _modules(store: TableStore, p: Params) -> list[dict]:
    # Each row says the steps its sums are over, so the page shows the CLI's per-step figures.
    steps = module_steps(store, p.step)
    return [{**m.to_dict(), "steps": steps} for m in module_tree(store, p.step)]


def _call_sites(store: TableStore, p: Params) -> list[dict]:
    return call_sites(store, phase=p.phase or None, step=p.step)


def _training_metrics(store: TableStore, p: Params) -> list[dict]:
    """One row per step: step time and the step's last value of each training scalar (loss, ..._per_second)."""
    return [{"step": r["step"], "dur_ns": r["dur_ns"], **r["metrics"]} for r in metrics_by_step(store)
            if r["metrics"] and (p.step is None or r["step"] == p.step)]


def _monitor_windows(store: TableStore, p: Params) -> list[dict]:
    """The windows monitor mode opened, and the triggers it had no window left for (``skipped``: why)."""
    overview = monitor_overview(store)
    return [] if overview is None else overview["windows"] + overview["skipped"]


DATASETS: dict[str, Dataset] = {d.name: d for d in (
    Dataset("steps", "Step breakdown (ns)", _steps),
    Dataset("step_categories", "Step time by category (kernel, memcpy, ..., CPU exec, other)", _step_categories),
    Dataset("op_statistic", "Operators by name", _op_statistic),
    Dataset("operator_details", "Operators by name and input shapes", _operator_details),
    Dataset("op_calls", "Calls of one operator, slowest first", _op_calls, needs_name="op"),
    Dataset("op_call_sites", "Where one operator was called from (Python lines, modules)", _op_call_sites,
            needs_name="op"),
    Dataset("kernel_statistic", "Device kernels and copies by name", _ops(kernel_statistic)),
    Dataset("kernel_calls", "Calls of one kernel, slowest first", _kernel_calls, needs_name="kernel"),
    Dataset("npu_cores", "Ascend NPU time by compute unit (AI Core, AI Vector Core, AI CPU, ...), with its pipes",
            _npu_cores),
    Dataset("api_statistic", "Runtime API calls by name", _ops(api_statistic)),
    Dataset("data_loading", "Data loading time per step", _data_loading),
    Dataset("data_loader_calls", "DataLoader calls", _data_loader_calls),
    Dataset("memory_timeline", "Allocated and reserved memory over time (max per time bucket)", _memory_timeline),
    Dataset("memory_peak", "Memory peak per device", _memory_peak),
    Dataset("memory_by_op", "Allocations per operator", _memory_by_op),
    Dataset("operator_memory", "Allocations with their lifetimes", lambda s, p: operator_memory(s, p.step)),
    Dataset("allocations", "Allocations in a time range on one device, largest first", _allocations),
    Dataset("modules", "nn.Module tree: forward, device and backward time", _modules),
    Dataset("call_sites", "Python call sites per phase (sampled stacks)", _call_sites),
    Dataset("training_metrics", "Training scalars per step (loss, throughput) beside step time", _training_metrics),
    Dataset("host_resources", "Host CPU, memory, disk and network samples", _host_resources),
    Dataset("counters", "Counter samples over time (max per time bucket)", _counters),
    Dataset("environment", "Environment and trace metadata", _environment),
    Dataset("job_steps", "Every step of the job (monitor mode), in buckets of consecutive steps",
            lambda s, p: job_step_series(s)),
    Dataset("monitor_windows", "Windows monitor mode opened, with their triggers", _monitor_windows),
)}


def get_dataset(name: str) -> Dataset:
    try:
        return DATASETS[name]
    except KeyError:
        raise ConfigError(f"{name!r}: no such dataset") from None
