"""Turns decoded windows (Kineto columns + mlprof's window files) into table columns.

Each window is built on its own (correlation ids and flow ids are only unique
inside one trace), then windows are stacked with running row ids.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

import numpy as np

from mlprof.errors import TraceFormatError
from mlprof.parse.capture_files import GcRecord, MarkersFile, ModulesFile, PythonSamplesFile, StepRecord
from mlprof.parse.hierarchy import assign_steps, fold_duplicates, nest_host_events
from mlprof.parse.release_memory import release_freed_memory
from mlprof.parse.kineto_events import FLOW_END, FLOW_START, MISSING, KinetoColumns, StringPool
from mlprof.parse.python_and_modules import module_call_table, python_tables
from mlprof.tables.names import BACKEND_COLLECTIVE, STEP_SPAN

__all__ = ["WindowData", "build_tables", "TableParts", "build_host_side", "build_flows", "build_misc", "step_table",
           "new_offsets", "add_capture_metadata", "add_steps", "STEP_NAME", "step_number", "strings_matching",
           "build_collectives", "build_capture_files"]

STEP_NAME = STEP_SPAN


def step_number(match: re.Match) -> int:
    """N of a ``ProfilerStep#N`` name (a STEP_NAME match); one past int64 is a corrupt trace."""
    number = int(match.group(1))
    if number >= 2**63:
        raise TraceFormatError(f"step name {match.group(0)[:60]!r}: step number does not fit 64 bits")
    return number
# Bytes per element of the dtype names Kineto writes for collectives.
_DTYPE_BYTES = {
    "float": 4, "float32": 4, "half": 2, "float16": 2, "bfloat16": 2, "double": 8, "float64": 8,
    "long": 8, "int64": 8, "int": 4, "int32": 4, "short": 2, "int16": 2, "char": 1, "int8": 1,
    "byte": 1, "uint8": 1, "bool": 1, "float8_e4m3fn": 1, "float8_e5m2": 1,
}


@dataclass
class WindowData:
    window_index: int
    kineto: KinetoColumns | None = None
    steps: list[StepRecord] = field(default_factory=list)
    markers: MarkersFile | None = None
    gc: list[GcRecord] = field(default_factory=list)
    python_samples: PythonSamplesFile | None = None
    modules: ModulesFile | None = None
    source: str = ""  # the window directory, for error messages


def _i64(values) -> np.ndarray:
    return np.array([MISSING if v is None else v for v in values], dtype=np.int64)


def _full(n: int, value, dtype=np.int64) -> np.ndarray:
    return np.full(n, value, dtype=dtype)


class TableParts:
    """Per-table lists of column dicts, concatenated at the end."""

    def __init__(self, pool: StringPool) -> None:
        self.parts: dict[str, list[dict[str, np.ndarray]]] = {}
        self.pool = pool

    def add(self, table: str, window: int, columns: dict[str, np.ndarray]) -> None:
        n = len(next(iter(columns.values())))
        if n == 0:
            return
        columns = dict(columns)
        # One value seen n times (a read-only view, no memory: DuckDB reads it as is),
        # not 8 bytes a row beside every table (80 MB at 10M ops).
        columns["window_index"] = np.broadcast_to(np.int64(window), (n,))
        self.parts.setdefault(table, []).append(columns)

    def result(self) -> dict[str, dict[str, np.ndarray]]:
        out = {}
        for table, parts in self.parts.items():
            keys = set().union(*(p.keys() for p in parts))
            for p in parts:
                n = len(p["window_index"])
                for key in keys - p.keys():
                    p[key] = np.full(n, None, dtype=object) if any(
                        q.get(key) is not None and q[key].dtype == object for q in parts) else np.full(n, MISSING)
            out[table] = {k: self._concat([p.get(k) for p in parts]) for k in keys}
        return out

    def _concat(self, arrays: list[np.ndarray | None]) -> np.ndarray:
        present = [a for a in arrays if a is not None]
        if any(a.dtype == object for a in present) and not all(a.dtype == object for a in present):
            # Text from mlprof's files meets pool codes from a trace: resolve the codes.
            lookup = np.array(self.pool.values() + [None], dtype=object)
            present = [a if a.dtype == object else lookup[a] for a in present]
        # One part (a bare trace): no copy, the decoded column is the table's.
        return present[0] if len(present) == 1 else np.concatenate(present)


def strings_matching(pool: StringPool, pattern: re.Pattern) -> dict[int, re.Match]:
    return {code: m for code, value in enumerate(pool.values())
            if isinstance(value, str) and (m := pattern.match(value))}


# A window's last step under this share of its other steps' median is a piece of one (see step_table).
CUT_STEP_SHARE = 0.1


def _without_cut_last_step(number: np.ndarray, start: np.ndarray, end: np.ndarray) -> tuple:
    """The steps less a last one the profiler's stop cut: torch's ``stop()`` closes the ``ProfilerStep#N``
    that the last ``step()`` had just opened, so a trace whose loop ended before the profiler did ends in a
    piece of a step (0.05 ms of one op after 9.3 ms steps in a real ROCm trace; every mlprof capture before
    mlprof marked such a step). Judged by time alone, under :data:`CUT_STEP_SHARE` of the median of the
    others, as both of the parser's reading paths see the steps before their ops."""
    if len(number) >= 2:
        dur = end - start
        if dur[-1] < CUT_STEP_SHARE * float(np.median(dur[:-1])):
            return number[:-1], start[:-1], end[:-1]
    return number, start, end


def step_table(win: WindowData, pool: StringPool, host: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray, str]:
    """The window's steps (number, start, end, source): the trace's ``ProfilerStep#N`` spans, else mlprof's
    own step records; a step mlprof marked ``partial`` (the profiler's stop cut it) is left out of both, and so
    is a last step that is a tenth of the others or less (:func:`_without_cut_last_step`)."""
    partial = {r.step for r in win.steps if r.partial}
    if host and len(host["name"]):
        step_codes = strings_matching(pool, STEP_NAME)
        if step_codes:
            mask = np.isin(host["name"], np.fromiter(step_codes, dtype=np.int32))
            idx = np.flatnonzero(mask)
            if idx.size:
                number = np.array([step_number(step_codes[c]) for c in host["name"][idx].tolist()], dtype=np.int64)
                start = host["start_ns"][idx]
                end = start + host["dur_ns"][idx]
                order = np.argsort(start, kind="stable")
                if partial:
                    order = order[~np.isin(number[order], np.fromiter(partial, dtype=np.int64))]
                return (*_without_cut_last_step(number[order], start[order], end[order]), "kineto")
    recs = sorted((r for r in win.steps if not r.partial), key=lambda r: r.start_ns)
    if recs:
        return (*_without_cut_last_step(_i64([r.step for r in recs]), _i64([r.start_ns for r in recs]),
                                        _i64([r.end_ns for r in recs])), "mlprof")
    empty = np.zeros(0, dtype=np.int64)
    return empty, empty, empty, "none"


def _step_cpu(win: WindowData, number: np.ndarray, start: np.ndarray,
              end: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per step, mlprof's CPU, core-wait and host-speed probe measures (steps.json), MISSING where it has none.

    Kineto's ProfilerStep spans and mlprof's steps are cut by the same ``step()``
    call; a record is taken for a step of the same number only when it starts
    inside the span (or within a tenth of it, at least 1 ms, before it), so a
    renumbered trace never borrows another step's figures. (A record may start
    well inside the span: a preemption between the hook's end of one step and
    the start of the next moved step 19's by 36 ms of a 273 ms span on a loaded
    host, and its wait for a core went missing.)
    """
    cpu, wait, thread, probe = (_full(len(number), MISSING) for _ in range(4))
    records = {r.step: r for r in win.steps}
    for i, (n, s, e) in enumerate(zip(number.tolist(), start.tolist(), end.tolist())):
        r = records.get(n)
        if r is None or not s - max((e - s) // 10, 1_000_000) <= r.start_ns < max(e, s + 1_000_000):
            continue
        if r.cpu_ns is not None:
            cpu[i] = r.cpu_ns
        if r.cpu_wait_ns is not None:
            wait[i] = r.cpu_wait_ns
        if r.thread_cpu_ns is not None:
            thread[i] = r.thread_cpu_ns
        if r.speed_probe_ns is not None:
            probe[i] = r.speed_probe_ns
    return cpu, wait, thread, probe


def _lookup(keys_sorted: np.ndarray, values: np.ndarray, query: np.ndarray) -> np.ndarray:
    """values[i] where keys_sorted[i] == query, else MISSING."""
    if len(keys_sorted) == 0:
        return _full(len(query), MISSING)
    pos = np.clip(np.searchsorted(keys_sorted, query), 0, len(keys_sorted) - 1)
    hit = (keys_sorted[pos] == query) & (query != MISSING)
    return np.where(hit, values[pos], MISSING)


def build_tables(windows: list[WindowData], pool: StringPool,
                 capture_metadata: dict[str, object]) -> dict[str, dict[str, np.ndarray]]:
    """Table name -> column arrays (string columns as ``pool`` codes)."""
    tables = TableParts(pool)
    offsets = new_offsets()
    add_capture_metadata(tables, capture_metadata)
    for win in windows:
        _build_window(win, pool, tables, offsets)
    return tables.result()


def new_offsets() -> dict[str, int]:
    """Running row ids of the windows built so far."""
    return {"op": 0, "call": 0, "device": 0}


def add_capture_metadata(tables: TableParts, capture_metadata: dict[str, object]) -> None:
    for key, value in capture_metadata.items():
        tables.add("metadata", MISSING, {"key": np.array([key], dtype=object),
                                          "value_json": np.array([json.dumps(value, default=str)], dtype=object)})


def _build_window(win: WindowData, pool: StringPool, tables: TableParts, offsets: dict[str, int]) -> None:
    k = win.kineto
    w = win.window_index
    step_of = add_steps(win, pool, tables, k.host if k else {})
    if k is not None:
        _build_kineto(k, w, pool, tables, offsets, step_of)
    build_capture_files(win, tables, step_of)


def add_steps(win: WindowData, pool: StringPool, tables: TableParts, host: dict):
    """The window's steps table (from ``host``: its ops, or only those named as steps); returns the
    function that gives the step of each time."""
    steps_n, steps_s, steps_e, source = step_table(win, pool, host)
    cpu_ns, cpu_wait_ns, thread_cpu_ns, speed_probe_ns = _step_cpu(win, steps_n, steps_s, steps_e)
    tables.add("steps", win.window_index, {"step": steps_n, "start_ns": steps_s, "end_ns": steps_e,
                                           "dur_ns": steps_e - steps_s,
                                           "source": np.array([source] * len(steps_n), dtype=object),
                                           "cpu_ns": cpu_ns, "cpu_wait_ns": cpu_wait_ns,
                                           "thread_cpu_ns": thread_cpu_ns, "speed_probe_ns": speed_probe_ns})

    def step_of(ts: np.ndarray) -> np.ndarray:
        return assign_steps(ts, steps_s, steps_e, steps_n, MISSING)

    return step_of


def _build_kineto(k: KinetoColumns, w: int, pool: StringPool, tables: TableParts,
                  offsets: dict[str, int], step_of) -> None:
    launch = build_host_side(k, w, pool, tables, offsets, step_of)
    if k.device:
        _build_device(k, w, pool, tables, offsets, step_of, *launch)
    build_flows(k, w, tables)
    build_misc(k, w, pool, tables)


def build_host_side(k: KinetoColumns, w: int, pool: StringPool, tables: TableParts, offsets: dict[str, int], step_of,
                    rows: dict[str, np.ndarray] | None = None, launches: bool | None = None) -> tuple:
    """The host ops, runtime calls and allocator events of ``k`` (nested on their threads) into ``tables``;
    returns what device ops need of their launches: per runtime call, its op, step and collective.

    ``rows``: each host op's and runtime call's row in the whole trace, for a stretch of it built
    alone (:mod:`mlprof.parse.segments`); their ids are those rows, not numbers from ``offsets``.
    ``launches``: whether device ops will look for their launches (default: whether ``k`` has any).
    """
    empty_i = np.zeros(0, dtype=np.int64)
    host, rt, dev, mem = k.host, k.runtime, k.device, k.memory
    n_ops = len(host["name"]) if host else 0
    leaves = []
    if rt:
        leaves.append((rt["pid"], rt["tid"], rt["start_ns"], rt["dur_ns"], True))
    if mem:
        leaves.append((mem["pid"], mem["tid"], mem["ts_ns"], np.zeros(len(mem["ts_ns"]), np.int64), False))
    if n_ops or leaves:
        if host:
            pf = pool.code("python_function")
            in_tree = host["category"] != pf
            nest = nest_host_events(host["pid"], host["tid"], host["start_ns"], host["dur_ns"], in_tree, leaves)
            del in_tree
            # The nesting's sort keys (half a GB on 4.5M ops) go back to the system, not to the next stage's heap.
            release_freed_memory()
        else:
            nest = nest_host_events(empty_i, empty_i, empty_i, empty_i, np.zeros(0, bool), leaves)
    op_base = offsets["op"]
    host_rows = rows["host"] if rows is not None else None

    # Each new column is made in one array, no temporaries as long as the ops:
    # at 10M ops every one is 80 MB, and this is the parse's peak.
    def op_ids(local: np.ndarray) -> np.ndarray:
        if host_rows is None:
            ids = local + op_base
        else:
            ids = host_rows[np.maximum(local, 0)] if n_ops else np.full(len(local), MISSING, dtype=np.int64)
        ids[local < 0] = MISSING
        return ids

    if n_ops:
        folded, folded_self = fold_duplicates(host["name"], nest.parent, nest.depth, nest.self_ns)
        depth = nest.depth.astype(np.int64)
        depth[nest.depth < 0] = MISSING
        cols = dict(host)
        cols.update({
            "op_id": np.arange(op_base, op_base + n_ops, dtype=np.int64) if host_rows is None else host_rows,
            "self_ns": nest.self_ns,
            "folded": folded,
            "folded_self_ns": folded_self,
            "depth": depth,
            "parent_op_id": op_ids(nest.parent),
            "step": step_of(host["start_ns"]),
        })
        del depth, folded, folded_self
        tables.add("host_ops", w, cols)
    leaf_i = 0
    rt_step = rt_owner = rt_comm = None
    if rt:
        n = len(rt["name"])
        rt_owner = op_ids(nest.leaf_owner[leaf_i])
        leaf_i += 1
        rt_step = step_of(rt["start_ns"])
        cols = dict(rt)
        cols.update({"call_id": np.arange(n, dtype=np.int64) + offsets["call"] if rows is None else rows["runtime"],
                     "host_op_id": rt_owner, "step": rt_step})
        tables.add("runtime_calls", w, cols)
        offsets["call"] += n
    if mem:
        owner = op_ids(nest.leaf_owner[leaf_i])
        cols = dict(mem)
        cols.update({"host_op_id": owner, "step": step_of(mem["ts_ns"])})
        tables.add("memory_events", w, cols)
    offsets["op"] += n_ops
    if (bool(dev) if launches is None else launches) and rt and n_ops:
        rt_comm = _communication_op(pool, host["name"], nest.parent)[nest.leaf_owner[0]]
        rt_comm[nest.leaf_owner[0] < 0] = -1
    return rt_owner, rt_step, rt_comm


def _communication_op(pool: StringPool, names: np.ndarray, parent: np.ndarray, levels: int = 4) -> np.ndarray:
    """Per host op: the code of the backend's collective op (nccl:all_reduce) it is or is inside (up to
    ``levels`` up), else -1."""
    comm = np.fromiter(strings_matching(pool, BACKEND_COLLECTIVE), dtype=np.int32)
    is_comm = np.isin(names, comm)
    code = np.where(is_comm, names, -1).astype(np.int64)
    node = parent
    for _ in range(levels):
        up = node >= 0
        safe = np.where(up, node, 0)
        found = (code < 0) & up & is_comm[safe]
        code = np.where(found, names[safe], code)
        node = np.where(up, parent[safe], -1)
    return code


def _build_device(k, w, pool, tables, offsets, step_of, rt_owner, rt_step, rt_comm) -> None:
    dev, rt = k.device, k.runtime
    n = len(dev["name"])
    launch_comm = _full(n, MISSING)
    if rt:
        order = np.argsort(rt["correlation"], kind="stable")
        keys = rt["correlation"][order]
        host_op = _lookup(keys, rt_owner[order], dev["correlation"])
        launch_step = _lookup(keys, rt_step[order], dev["correlation"])
        if rt_comm is not None:
            launch_comm = _lookup(keys, rt_comm[order], dev["correlation"])
    else:
        host_op = _full(n, MISSING)
        launch_step = _full(n, MISSING)
    # A kernel belongs to the step its launch happened in; without a launch
    # record, to the step it ran in.
    step = np.where(launch_step != MISSING, launch_step, step_of(dev["start_ns"]))
    base = offsets["device"]
    cols = dict(dev)
    cols.update({"device_op_id": np.arange(n, dtype=np.int64) + base, "host_op_id": host_op, "step": step})
    tables.add("device_ops", w, cols)
    offsets["device"] += n
    if k.collectives:
        rows = k.collectives["device_row"]
        at_rows = {"name": dev["name"][rows], "device": dev["device"][rows], "stream": dev["stream"][rows],
                   "start_ns": dev["start_ns"][rows], "dur_ns": dev["dur_ns"][rows], "step": step[rows]}
        build_collectives(k.collectives, w, pool, tables, base, at_rows, launch_comm[rows])


def build_collectives(coll: dict[str, np.ndarray], w: int, pool: StringPool, tables: TableParts, base: int,
                      at_rows: dict[str, np.ndarray], launched: np.ndarray) -> None:
    """The collectives table from Kineto's collective records, with ``at_rows`` their kernels' columns
    (name, device, stream, start_ns, dur_ns, step) and ``launched`` the communication op that launched
    each (a string code; -1 or MISSING: none)."""
    rows = coll["device_row"]
    strings = pool.values()
    dtype_bytes = np.array([
        _DTYPE_BYTES.get(strings[c].lower(), MISSING) if c >= 0 else MISSING
        for c in coll["dtype"].tolist()], dtype=np.int64)
    nelems = coll["in_nelems"]
    size = np.where((dtype_bytes != MISSING) & (nelems != MISSING), nelems * dtype_bytes, MISSING)
    cols = {key: v for key, v in coll.items() if key not in ("device_row", "kernel_collective")}
    # A collective is named by Kineto, else by the op that launched it
    # (NCCL runs most collectives in SendRecv kernels), else by its kernel.
    launched = np.where(launched == MISSING, -1, launched).astype(np.int32)
    # Importers that name every collective themselves (Ascend) have no kernel-name fallback.
    fallback = coll.get("kernel_collective", coll["collective_name"])
    cols["collective_name"] = np.where(coll["collective_name"] >= 0, coll["collective_name"],
                                       np.where(launched >= 0, launched, fallback))
    cols.update({"device_op_id": rows + base, **at_rows, "size_bytes": size})
    tables.add("collectives", w, cols)


def build_flows(k: KinetoColumns, w: int, tables: TableParts) -> None:
    fl = k.flows
    if not fl:
        return
    pairs = _paired_flows(fl["ph"], fl["category"], fl["flow_id"])
    if pairs is None:
        pairs = _paired_flows_in_order(fl)
    if not len(pairs[0]):
        return
    a, b = pairs
    tables.add("flows", w, {
        "flow_id": fl["flow_id"][a], "category": fl["category"][a],
        "start_pid": fl["pid"][a], "start_tid": fl["tid"][a], "start_ns": fl["ts_ns"][a],
        "end_pid": fl["pid"][b], "end_tid": fl["tid"][b], "end_ns": fl["ts_ns"][b],
    })


def _paired_flows(ph: np.ndarray, category: np.ndarray, flow_id: np.ndarray) -> tuple | None:
    """(start rows, end rows) of the flows, in the order their second event comes, when every
    (category, id) has exactly one start and one end (Kineto's flows); else None."""
    rows = np.flatnonzero((ph == FLOW_START) | (ph == FLOW_END))
    if len(rows) % 2:
        return None
    rows = rows[np.lexsort((rows, flow_id[rows], category[rows]))]
    first, second = rows[0::2], rows[1::2]
    if not ((category[first] == category[second]).all() and (flow_id[first] == flow_id[second]).all()
            and (ph[first] != ph[second]).all()):
        return None
    if len(first) > 1:  # two events a key, not more: the next pair's key differs
        if ((category[second[:-1]] == category[first[1:]]) & (flow_id[second[:-1]] == flow_id[first[1:]])).any():
            return None
    order = np.argsort(second, kind="stable")
    first, second = first[order], second[order]
    starts_first = ph[first] == FLOW_START
    return np.where(starts_first, first, second), np.where(starts_first, second, first)


def _paired_flows_in_order(fl: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """The general pairing, event by event (repeated or unmatched ids)."""
    ph = fl["ph"].tolist()
    cat = fl["category"].tolist()
    fid = fl["flow_id"].tolist()
    # Kineto does not always write a flow's start before its end: pair by id.
    starts: dict[tuple[int, int], int] = {}
    ends: dict[tuple[int, int], int] = {}
    pairs: list[tuple[int, int]] = []
    for i, p in enumerate(ph):
        key = (cat[i], fid[i])
        if p == FLOW_START:
            j = ends.pop(key, None)
            if j is None:
                starts[key] = i
            else:
                pairs.append((i, j))
        elif p == FLOW_END:
            j = starts.pop(key, None)
            if j is None:
                ends[key] = i
            else:
                pairs.append((j, i))
    return (np.array([p[0] for p in pairs], dtype=np.int64), np.array([p[1] for p in pairs], dtype=np.int64))


def build_misc(k: KinetoColumns, w: int, pool: StringPool, tables: TableParts) -> None:
    ann = k.device_annotations
    if ann:
        n = len(ann["name"])
        tables.add("markers", w, {
            "name": ann["name"], "kind": np.array(["device_annotation"] * n, dtype=object),
            "start_ns": ann["start_ns"], "end_ns": ann["start_ns"] + ann["dur_ns"],
            "pid": ann["pid"], "tid": ann["tid"]})
    ins = k.instants
    if ins:
        n = len(ins["name"])
        tables.add("markers", w, {"name": ins["name"], "kind": np.array(["instant"] * n, dtype=object),
                                  "start_ns": ins["start_ns"], "pid": ins["pid"], "tid": ins["tid"]})
    if k.counters:
        tables.add("counters", w, dict(k.counters))
    if k.threads:
        tables.add("threads", w, {
            "pid": _i64([t[0] for t in k.threads]), "tid": _i64([t[1] for t in k.threads]),
            "kind": np.array([t[2] for t in k.threads], dtype=object),
            "value": np.array([t[3] for t in k.threads], dtype=object)})
    meta = dict(k.metadata)
    meta["eventCount"] = str(k.event_count).encode()
    tables.add("metadata", w, {"key": np.array(list(meta), dtype=object),
                               "value_json": np.array([v.decode("utf-8", "replace") for v in meta.values()],
                                                      dtype=object)})
    if k.unknown:
        items = list(k.unknown.items())
        tables.add("unknown_events", w, {
            "ph": np.array([key[0] for key, _ in items], dtype=object),
            "category": np.array([key[1] for key, _ in items], dtype=object),
            "count": _i64([c for _, c in items])})


def build_capture_files(win: WindowData, tables: TableParts, step_of) -> None:
    """The tables of mlprof's own window files: markers, GC pauses, Python samples, module calls."""
    w = win.window_index
    m = win.markers
    if m and (m.marks or m.ranges):
        names = [x.name for x in m.marks] + [r.name for r in m.ranges]
        kinds = ["mark"] * len(m.marks) + ["range"] * len(m.ranges)
        tables.add("markers", w, {
            "name": np.array(names, dtype=object), "kind": np.array(kinds, dtype=object),
            "start_ns": _i64([x.ts_ns for x in m.marks] + [r.start_ns for r in m.ranges]),
            "end_ns": _i64([None] * len(m.marks) + [r.end_ns for r in m.ranges]),
            "tid": _i64([x.tid for x in m.marks] + [r.tid for r in m.ranges]),
            "range_id": _i64([None] * len(m.marks) + [r.id for r in m.ranges]),
            "device_start_ns": _i64([None] * len(m.marks) + [r.device_start_ns for r in m.ranges]),
            "device_end_ns": _i64([None] * len(m.marks) + [r.device_end_ns for r in m.ranges]),
        })
    if win.gc:
        start = _i64([g.start_ns for g in win.gc])
        tables.add("gc_pauses", w, {
            "start_ns": start, "dur_ns": _i64([g.dur_ns for g in win.gc]),
            "generation": _i64([g.generation for g in win.gc]),
            "collected": _i64([g.collected for g in win.gc]),
            "uncollectable": _i64([g.uncollectable for g in win.gc]),
            "tid": _i64([g.tid for g in win.gc]), "step": step_of(start)})
    if win.python_samples is not None:
        for name, cols in python_tables(win.python_samples, f"{win.source}/python_samples.json", step_of).items():
            tables.add(name, w, cols)
    if win.modules is not None and win.modules.calls:
        tables.add("module_calls", w, module_call_table(win.modules, f"{win.source}/modules.json", step_of))
