"""The segmented build: a trace whose tables would not fit the memory budget, a stretch of time at a time.

Its decoded pieces wait on disk (:mod:`mlprof.parse.spill`). The trace is
cut at step starts that no host op crosses: there, nesting, the owners of
runtime calls and allocator events, duplicate folding and steps never reach
across the cut (on the real traces at hand nearly every step start is such
a cut; a DDP rank's collective on its communication thread may cross one).
The host ops, runtime calls and allocator events of each stretch are built
alone, by the same code as a whole trace, with their rows in the whole trace
as ids, and written as parts; DuckDB then puts each table together in file
order, sorting on disk beyond its share of the budget. Device ops are built
a chunk of rows at a time, each stretch's runtime calls are kept on disk as
launches, and DuckDB joins the two by correlation id; flows are paired by
DuckDB too (:mod:`mlprof.parse.segment_joins`). Markers, counters, a capture
window's own files and the rest are small and built once, as for a whole
trace. So the tables are the very ones the whole-trace build writes.

A capture window whose steps are only mlprof's (no ``ProfilerStep#N``
spans) is cut at those steps' starts. Traces that cannot be cut are read
back whole (``load_spilled``).
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mlprof.errors import ConfigError
from mlprof.parse.build import (STEP_NAME, TableParts, WindowData, add_capture_metadata, add_steps,
                                build_capture_files, build_host_side, build_misc, new_offsets, strings_matching)
from mlprof.parse.capture_files import StepRecord
from mlprof.parse.kineto_events import KinetoColumns, StringPool
from mlprof.parse.trace_blocks import events_in_trace
from mlprof.parse.release_memory import release_freed_memory
from mlprof.parse.segment_joins import Launches, write_device_ops, write_flows
from mlprof.parse.spill import TIME_COLUMN, SpilledTrace
from mlprof.tables.budget import memory_budget_bytes
from mlprof.tables.schema import TABLES
from mlprof.tables.store import connect, stack_parts, write_tables

__all__ = ["SEGMENT_EVENTS_ENV", "SEGMENTED_TABLES", "Plan", "wants_spill", "plan_segments", "write_segmented"]

SEGMENTED_TABLES = ("host_ops", "runtime_calls", "memory_events")
# Events a stretch may hold (forces the segmented parse, whatever the trace's size: for tests).
SEGMENT_EVENTS_ENV = "MLPROF_SEGMENT_EVENTS"
# Memory the whole-trace build holds at its peak, per event (measured: 130-150 bytes on CPU traces, 174 on a
# 5.0M-event GPU trace; wants_spill's quarter of the budget to spare covers the difference).
_PEAK_BYTES_PER_EVENT = 150


def _forced_events() -> int | None:
    text = os.environ.get(SEGMENT_EVENTS_ENV, "").strip()
    if not text:
        return None
    try:
        return max(1, int(text))
    except ValueError:
        raise ConfigError(f"{SEGMENT_EVENTS_ENV}={text!r} is not a whole number of events") from None


def wants_spill(path: Path, budget_bytes: int | None) -> bool:
    """Whether the trace in ``path`` would outgrow three quarters of the budget built whole: its
    pieces are then spilled as they are decoded."""
    if _forced_events() is not None:
        return True
    try:
        events = events_in_trace(path)
    except OSError:
        return False  # the reader names the problem
    return events * _PEAK_BYTES_PER_EVENT > memory_budget_bytes(budget_bytes) * 3 // 4


@dataclass
class Plan:
    """Where the trace is cut (times; a stretch is [cut before, cut after)) and its steps' host rows."""

    cuts: list[int]
    steps_host: dict[str, np.ndarray]
    events_per_stretch: int


def _stretch(trace: SpilledTrace, kind: str, lo: int | None, hi: int | None) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """The rows of ``kind`` with times in [lo, hi) (None: unbounded) in file order, and their rows in the trace."""
    time = TIME_COLUMN[kind]
    parts, rows = [], []
    first_row = trace.rows_before(kind)
    for index in trace.overlapping(kind, lo, hi):
        columns = trace.piece_columns(index, kind)
        keep = np.ones(len(columns[time]), dtype=bool)
        if lo is not None:
            keep &= columns[time] >= lo
        if hi is not None:
            keep &= columns[time] < hi
        at = np.flatnonzero(keep)
        if len(at):
            parts.append({name: values[at] for name, values in columns.items()})
            rows.append(at + first_row[index])
    if not parts:
        return {}, np.zeros(0, dtype=np.int64)
    return ({name: np.concatenate([p[name] for p in parts]) for name in parts[0]},
            np.concatenate(rows).astype(np.int64))


def plan_segments(trace: SpilledTrace, pool: StringPool, budget_bytes: int | None,
                  mlprof_steps: list[StepRecord] | None = None) -> Plan | None:
    """Where to cut ``trace`` so that each stretch holds a budgeted number of events; None when it
    cannot be segmented (no step, or no cut that helps). Its steps are its ``ProfilerStep#N`` spans,
    else (as :func:`build.step_table` takes them) a capture window's ``mlprof_steps``."""
    per_stretch = _forced_events() or max(1, memory_budget_bytes(budget_bytes) // 3 // _PEAK_BYTES_PER_EVENT)
    codes = np.fromiter(strings_matching(pool, STEP_NAME), dtype=np.int32)
    named = []  # the host rows named as steps, piece by piece, in file order
    for index in trace.overlapping("host", None, None):
        host = trace.piece_columns(index, "host", ["name", "start_ns", "dur_ns"])
        at = np.flatnonzero(np.isin(host["name"], codes))
        named.append({name: values[at] for name, values in host.items()})
    if named and sum(len(part["name"]) for part in named):
        steps_host = {name: np.concatenate([part[name] for part in named]) for name in named[0]}
        candidates = np.unique(steps_host["start_ns"])
    elif mlprof_steps:
        steps_host = {}
        candidates = np.unique(np.array([r.start_ns for r in mlprof_steps], dtype=np.int64))
    else:
        return None
    crossed = np.zeros(len(candidates) + 1, dtype=np.int64)
    events = np.zeros(len(candidates) + 1, dtype=np.int64)
    not_nested = pool.code("python_function")  # the whole-trace build asks for it too
    for index in trace.overlapping("host", None, None):
        host = trace.piece_columns(index, "host", ["category", "start_ns", "dur_ns"])
        events += np.bincount(np.searchsorted(candidates, host["start_ns"], side="right"), minlength=len(events))
        tree = (host["category"] != not_nested) & (host["dur_ns"] > 0)
        start = host["start_ns"][tree]
        # Candidates strictly inside an op: the op would be cut in two.
        a = np.searchsorted(candidates, start, side="right")
        b = np.searchsorted(candidates, start + host["dur_ns"][tree], side="left")
        inside = a < b
        np.add.at(crossed, a[inside], 1)
        np.add.at(crossed, b[inside], -1)
    for kind in ("runtime", "memory"):
        for index in trace.overlapping(kind, None, None):
            times = trace.piece_columns(index, kind, [TIME_COLUMN[kind]])[TIME_COLUMN[kind]]
            events += np.bincount(np.searchsorted(candidates, times, side="right"), minlength=len(events))
    clean = np.cumsum(crossed)[:len(candidates)] == 0
    cuts, held = [], int(events[0])
    for j, at in enumerate(candidates.tolist()):
        if held >= per_stretch and clean[j]:
            cuts.append(at)
            held = 0
        held += int(events[j + 1])
    return Plan(cuts, steps_host, per_stretch) if cuts else None


def write_segmented(out_dir: Path, trace: SpilledTrace, plan: Plan, pool: StringPool,
                    capture_metadata: dict[str, object], budget_bytes: int | None = None,
                    on_stage=None, win: WindowData | None = None) -> dict[str, int]:
    """Every table but ``phase_spans`` into ``out_dir``, a stretch at a time; returns each built table's rows.
    ``win``: the capture window ``trace`` is part of, with mlprof's files (its ``kineto`` unused)."""
    win = win or WindowData(window_index=0)
    w = win.window_index
    rest = TableParts(pool)
    add_capture_metadata(rest, capture_metadata)
    step_of = add_steps(win, pool, rest, plan.steps_host)
    bounds = [None, *plan.cuts, None]
    parts: dict[str, list[Path]] = {name: [] for name in SEGMENTED_TABLES}
    parts_dir = out_dir / ".parts"
    with_device = trace.rows("device") > 0
    launches = Launches(parts_dir, budget_bytes)
    for n, (lo, hi) in enumerate(zip(bounds[:-1], bounds[1:])):
        if on_stage is not None:
            on_stage(f"building tables: stretch {n + 1} of {len(bounds) - 1}")
        host, host_rows = _stretch(trace, "host", lo, hi)
        runtime, runtime_rows = _stretch(trace, "runtime", lo, hi)
        memory, memory_rows = _stretch(trace, "memory", lo, hi)
        k = KinetoColumns(base_time_ns=trace.cols.base_time_ns,
                          host=host, runtime=runtime, memory=memory)
        tables = TableParts(pool)
        owner, step, comm = build_host_side(k, w, pool, tables, new_offsets(), step_of,
                                            {"host": host_rows, "runtime": runtime_rows}, with_device)
        if with_device and runtime:
            launches.add(runtime["correlation"], runtime_rows, owner, step, comm)
        del k, host, runtime, memory, owner, step, comm
        columns = tables.result()
        order = {"host_ops": host_rows, "runtime_calls": runtime_rows, "memory_events": memory_rows}
        written = tuple(columns)
        write_tables(parts_dir / f"{n:05d}", columns, pool.values(), budget_bytes, written, order)
        for name in written:
            parts[name].append(parts_dir / f"{n:05d}" / f"{name}.parquet")
        del columns, tables
        release_freed_memory()
    con = connect(budget_bytes)
    try:
        if with_device:
            if on_stage is not None:
                on_stage("building tables: device ops")
            device_rows = write_device_ops(out_dir, parts_dir, trace, pool, step_of, launches, rest, w,
                                           plan.events_per_stretch, con, budget_bytes)
        if on_stage is not None and trace.rows("flows"):
            on_stage("building tables: flows")
        flow_rows = write_flows(out_dir, parts_dir, trace, pool, w, plan.events_per_stretch, con, budget_bytes)
    finally:
        con.close()
    if on_stage is not None:
        on_stage("writing tables")
    k = KinetoColumns(base_time_ns=trace.cols.base_time_ns,
                      metadata=trace.cols.metadata, threads=trace.cols.threads, unknown=trace.cols.unknown,
                      event_count=trace.cols.event_count)
    for kind in ("instants", "device_annotations", "counters"):
        setattr(k, kind, trace.columns(kind))
    build_misc(k, w, pool, rest)
    build_capture_files(win, rest, step_of)
    columns = rest.result()
    rows = {name: len(values["window_index"]) for name, values in columns.items()}
    done = (*SEGMENTED_TABLES, "flows", *(("device_ops",) if with_device else ()))
    write_tables(out_dir, columns, pool.values(), budget_bytes, tuple(name for name in TABLES if name not in done))
    stacked = {name: stack_parts(out_dir, name, parts[name], budget_bytes) for name in SEGMENTED_TABLES}
    if with_device:
        stacked["device_ops"] = device_rows
    shutil.rmtree(parts_dir)
    # Row counts in the order the whole-trace build makes its tables: the stretches' tables and the
    # device ops after the steps, the flows after the collectives.
    ordered = {}
    for name, count in rows.items():
        ordered[name] = count
        if name == "steps":
            ordered.update({n: c for n, c in stacked.items() if c})
        if flow_rows and name == ("collectives" if "collectives" in rows else "steps"):
            ordered["flows"] = flow_rows
    return ordered
