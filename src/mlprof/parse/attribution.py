"""Attribution: every nanosecond of every step gets one phase, decided once.

Run when tables are built; writes the ``phase_spans`` table, which every
analysis, export and page reads (the rules are in :mod:`mlprof.parse.phase_rules`,
the vocabulary they apply in :mod:`mlprof.tables.phases`).

Host view, on the step's thread (the thread of ``ProfilerStep#N``, else the
one mlprof sampled, else the one with the most op time):

1. Ops and phase-defining spans (ops, ``nn.Module`` calls, mstx ranges) are
   swept in nesting order; a moment takes the phase of the innermost span that
   defines one. An ``Optimizer.step`` that runs backward inside it (a closure,
   as LBFGS and Lightning do) is forward up to that backward.
2. Op time under no defining span is forward before the step's first backward
   (loss functions, functional layers) and ``other`` after it (logging, metrics).
3. Time under no op is backward or communication when another thread of the
   job runs one (the autograd engine's device threads, collectives), or
   backward when it lies between two backward nodes (the engine's own work
   between nodes); else ``python``: Python code running between ops.
4. A garbage-collector pause on the thread is ``gc``, whatever it interrupted.

Device view, over all device work of the step: ``compute`` (kernels),
``communication`` (not hidden behind compute), ``memcpy``, ``memset``, else
``idle`` with a cause: the host phase at that moment (data loading, Python,
GC, communication, or ``launch`` when the host was busy issuing work), or
``synchronization`` for an idle gap that began while the host was blocked in
a synchronizing call (the device drained because the host waited on it).

The spans of a step partition it exactly: they sum to the step in each view.
The host view is worked out for a run of steps at once (:mod:`mlprof.parse.host_view`).
"""

from __future__ import annotations

from functools import partial

import numpy as np

from mlprof.parse.backward_links import BACKWARD_LINKS_TABLE, write_backward_links
from mlprof.parse.host_view import (
    NEUTRAL, PHASE_CODE, StepSegments, covered, disjoint_runs, host_segments, sorted_unique, union_intervals)
from mlprof.parse.phase_rules import idle_cause, span_phase
from mlprof.tables.names import is_sync_call, module_frame_sql, step_span_sql
from mlprof.parse.workers import abandon_part, finish_part, start_part, worker_count
from mlprof.tables.phases import HOST_PHASES, window_extents
from mlprof.tables.budget import memory_budget_bytes
from mlprof.tables.store import TableStore, replace_table

__all__ = ["attribute_phases", "write_attribution", "ATTRIBUTION_TABLE", "DERIVED_TABLES"]

# The table the attribution writes (from all the others).
ATTRIBUTION_TABLE = "phase_spans"
# The tables write_attribution derives from the others (written by it, never by the table writer).
DERIVED_TABLES = (ATTRIBUTION_TABLE, BACKWARD_LINKS_TABLE)

_DEVICE_LABELS = ("compute", "communication", "memcpy", "memset")
_SPAN_COLUMNS = ("window_index", "step", "view", "phase", "cause", "start_ns", "end_ns", "dur_ns", "tid",
                 "overlapped")
_MISSING = -(2**63)  # NULL in integer columns


# -- device view ----------------------------------------------------------------
def _device_partition(lo: int, hi: int, dev: _Spans, host: StepSegments, syncs: tuple) -> list[list]:
    """Rows of ``[(label code, overlapped, idle cause), start_ns, end_ns]`` partitioning the step."""
    dev = dev.overlapping(lo, hi)
    s, e, kind = np.clip(dev["start_ns"], lo, hi), np.clip(dev["end_ns"], lo, hi), dev["kind"]
    # Cut at host phase changes too: an idle gap takes the cause of each host phase it spans.
    cuts = sorted_unique(np.concatenate([[lo, hi], s, e, host.start]))
    ps, pe = cuts[:-1], cuts[1:]
    label = np.full(len(ps), len(_DEVICE_LABELS), dtype=np.int64)  # idle
    overlapped = np.zeros(len(ps), dtype=bool)
    cover = {}
    for code in range(len(_DEVICE_LABELS) - 1, -1, -1):  # lowest code (compute) wins
        us, ue = union_intervals(s[kind == code], e[kind == code])
        cover[code] = covered(ps, us, ue)
        label[cover[code]] = code
    overlapped = cover[0] & cover[1]
    # Idle pieces take the host phase at their start as cause.
    host_at = host.label[np.clip(np.searchsorted(host.start, ps, side="right") - 1, 0, len(host.label) - 1)]
    causes = np.array([idle_cause(HOST_PHASES[int(c)]) for c in host_at], dtype=object)
    sync_s, sync_e = syncs
    ssel = (sync_s < hi) & (sync_e > lo)
    if ssel.any():
        idle = label == len(_DEVICE_LABELS)
        # An idle gap that began while the host waited in a sync: the sync emptied the queue.
        gap_start = idle & np.r_[True, ~idle[:-1]]
        in_sync = covered(ps, *union_intervals(sync_s[ssel], sync_e[ssel])) & gap_start
        gap_id = np.cumsum(gap_start)
        synced_gaps = set(gap_id[in_sync].tolist())
        causes[idle & np.isin(gap_id, list(synced_gaps))] = "synchronization"
    keys = [(int(l), bool(o), c if l == len(_DEVICE_LABELS) else None) for l, o, c in zip(label, overlapped, causes)]
    rows = []
    for i, key in enumerate(keys):
        if rows and rows[-1][0] == key:
            rows[-1][2] = int(pe[i])
        else:
            rows.append([key, int(ps[i]), int(pe[i])])
    return rows


# -- inputs ---------------------------------------------------------------------
def _phase_codes(names: np.ndarray, annotation: np.ndarray) -> np.ndarray:
    # A trace has a few hundred distinct op names for a million ops: decide
    # each (name, annotation) once, then map every op at C speed.
    keys = list(zip(map(str, names.tolist()), map(bool, annotation.tolist())))
    codes = {}
    for key in dict.fromkeys(keys):
        phase = span_phase(key[0], key[1])
        codes[key] = PHASE_CODE[phase] if phase else NEUTRAL
    return np.fromiter(map(codes.__getitem__, keys), dtype=np.int64, count=len(keys))


class _Spans:
    """Intervals sorted by start, cut out per step without a pass over all of them.

    Most spans are short: those of a step lie in one slice of the sorted
    starts. The few long ones (the widest 1%) are kept apart and tested one
    by one, so the result is exactly that of a mask over all spans.
    """

    def __init__(self, cols: dict[str, np.ndarray]) -> None:
        order = np.argsort(cols["start_ns"], kind="stable")
        cols = {k: v[order] for k, v in cols.items()}
        dur = cols["end_ns"] - cols["start_ns"]
        self.width = int(np.percentile(dur, 99)) if len(dur) else 0
        long = dur > self.width
        self.short = {k: v[~long] for k, v in cols.items()}
        self.long = {k: v[long] for k, v in cols.items()}

    def overlapping(self, lo: int, hi: int) -> dict[str, np.ndarray]:
        """The spans with start < hi and end > lo, in start order (as a mask over all would give)."""
        s = self.short
        a = np.searchsorted(s["start_ns"], lo - self.width, side="left")
        b = np.searchsorted(s["start_ns"], hi, side="left")
        part = {k: v[a:b] for k, v in s.items()}
        sel = part["end_ns"] > lo
        lsel = (self.long["start_ns"] < hi) & (self.long["end_ns"] > lo)
        if not lsel.any():
            return {k: v[sel] for k, v in part.items()}
        merged = {k: np.concatenate([v[sel], self.long[k][lsel]]) for k, v in part.items()}
        order = np.argsort(merged["start_ns"], kind="stable")
        return {k: v[order] for k, v in merged.items()}


def _arrays(store: TableStore, query: str, params: list | None = None) -> dict[str, np.ndarray]:
    got = store.sql(query, params).fetchnumpy()
    return {k: np.asarray(v) for k, v in got.items()}


def _step_threads(store: TableStore) -> dict[int, int]:
    """The thread that runs the steps, per window."""
    out: dict[int, int] = {}
    for window, tid in store.rows(
            "SELECT window_index, any_value(tid) FROM python_samples GROUP BY window_index"):
        out[window] = tid
    for window, tid in store.rows(
            "SELECT window_index, mode(tid) FROM module_calls GROUP BY window_index"):
        out.setdefault(window, tid)
    for window, tid in store.rows(
            "SELECT window_index, arg_max(tid, total) FROM (SELECT window_index, tid, sum(dur_ns) AS total "
            "FROM host_ops WHERE depth = 0 AND category <> 'python_function' GROUP BY ALL) GROUP BY window_index"):
        out.setdefault(window, tid)
    # ProfilerStep#N is opened by step() on the training thread: the strongest sign.
    for window, tid in store.rows(
            f"SELECT window_index, mode(tid) FROM host_ops WHERE {step_span_sql()} GROUP BY window_index"):
        out[window] = tid
    return out


def _during(lo: int | None, hi: int | None, start: str, end: str) -> tuple[str, list]:
    """SQL (and its parameters) for spans with ``start`` < hi and ``end`` > lo: those that can touch a
    step in [lo, hi), as the sweep cuts them (None: every span)."""
    if lo is None:
        return "", []
    return f" AND {start} < ? AND {end} > ?", [hi, lo]


def _window_inputs(store: TableStore, window: int, tid: int | None, lo: int | None = None,
                   hi: int | None = None) -> tuple[dict, dict, dict]:
    """The spans the host view of the window's steps in [lo, hi) uses (None: all its steps)."""
    during, when = _during(lo, hi, "h.start_ns", "h.start_ns + h.dur_ns")
    where = f"""h.window_index = ? AND NOT {step_span_sql('h.name')} AND h.dur_ns >= 0
               AND (h.category <> 'python_function' OR {module_frame_sql('h.name')}){during}"""
    # Phases are decided per distinct (name, annotation) here, then joined in
    # SQL: a million ops never come back as a million Python strings, and only
    # the spans the sweep uses are fetched. "Child of a step" is a semi-join on
    # the few step ops, not a join of every op with its parent (which built a
    # hash table of every op: 0.2 GB on 4.5M events).
    names = _arrays(store, f"SELECT DISTINCT h.name, coalesce(h.category = 'user_annotation', false) AS annotation "
                           f"FROM host_ops h WHERE {where}", [window, *when])
    store.con.register("_phases", {"name": names["name"], "annotation": names["annotation"],
                                   "phase": _phase_codes(names["name"], names["annotation"])})
    on_thread = "coalesce(h.tid = ?, false)"
    ops = _arrays(store, f"""
        SELECT h.start_ns, h.start_ns + h.dur_ns AS end_ns, f.phase, {on_thread} AS on_thread
        FROM host_ops h
        JOIN _phases f ON f.name IS NOT DISTINCT FROM h.name
                      AND f.annotation = coalesce(h.category = 'user_annotation', false)
        WHERE {where} AND (
            ({on_thread} AND (coalesce(h.depth = 0, false) OR f.phase >= 0
                              OR coalesce(h.parent_op_id IN (SELECT op_id FROM host_ops
                                                             WHERE {step_span_sql()}), false)))
            OR (NOT {on_thread} AND coalesce(h.depth = 0, false) AND f.phase IN ({PHASE_CODE["backward"]},
                                                                               {PHASE_CODE["communication"]})))
        ORDER BY h.op_id""", [tid, window, *when, tid, tid])
    store.con.unregister("_phases")
    mine = ops["on_thread"].astype(bool)
    phase = ops["phase"].astype(np.int64)
    parts = [(ops["start_ns"][mine], ops["end_ns"][mine], phase[mine])]
    thread = tid if tid is not None else -1
    during, when = _during(lo, hi, "start_ns", "end_ns")
    mods = _arrays(store, "SELECT start_ns, end_ns FROM module_calls WHERE window_index = ? AND tid = ? "
                          f"AND end_ns IS NOT NULL{during}", [window, thread, *when])
    parts.append((mods["start_ns"], mods["end_ns"], np.full(len(mods["start_ns"]), PHASE_CODE["forward"])))
    ranges = _arrays(store, "SELECT start_ns, end_ns, name FROM markers WHERE window_index = ? AND kind = 'range' "
                            f"AND end_ns IS NOT NULL AND end_ns >= start_ns AND tid = ?{during}",
                     [window, thread, *when])
    rphase = _phase_codes(ranges["name"], np.ones(len(ranges["name"]), dtype=bool))
    parts.append((ranges["start_ns"][rphase >= 0], ranges["end_ns"][rphase >= 0], rphase[rphase >= 0]))
    spans = {"start_ns": np.concatenate([p[0] for p in parts]).astype(np.int64),
             "end_ns": np.concatenate([p[1] for p in parts]).astype(np.int64),
             "phase": np.concatenate([p[2] for p in parts]).astype(np.int64)}
    # Other threads: their outermost backward and communication work.
    other = {"start_ns": ops["start_ns"][~mine].astype(np.int64), "end_ns": ops["end_ns"][~mine].astype(np.int64),
             "phase": phase[~mine]}
    during, when = _during(lo, hi, "start_ns", "start_ns + dur_ns")
    gc = _arrays(store, "SELECT start_ns, start_ns + dur_ns AS end_ns FROM gc_pauses WHERE window_index = ? "
                        f"AND (tid IS NULL OR tid = ?){during}", [window, thread, *when])
    gc = {k: v.astype(np.int64) for k, v in gc.items()}
    return spans, other, gc


def _device_inputs(store: TableStore, window: int, lo: int | None = None, hi: int | None = None) -> tuple[dict, tuple]:
    during, when = _during(lo, hi, "start_ns", "start_ns + dur_ns")
    dev = _arrays(store, f"""
        SELECT start_ns, start_ns + dur_ns AS end_ns,
               CASE WHEN kind = 'kernel' AND NOT coalesce(is_communication, false) THEN 0
                    WHEN kind = 'kernel' THEN 1 WHEN kind = 'memcpy' THEN 2 ELSE 3 END AS kind
        FROM device_ops WHERE window_index = ? AND kind IN ('kernel', 'memcpy', 'memset') AND dur_ns >= 0{during}""",
                  [window, *when])
    calls = _arrays(store, "SELECT start_ns, start_ns + dur_ns AS end_ns, name FROM runtime_calls "
                           f"WHERE window_index = ? AND dur_ns > 0{during}", [window, *when])
    sync = np.array([is_sync_call(str(n)) for n in calls["name"]], dtype=bool)
    return (_Spans({k: v.astype(np.int64) for k, v in dev.items()}),
            (calls["start_ns"][sync].astype(np.int64), calls["end_ns"][sync].astype(np.int64)))


# Steps per forked worker below which attribution stays in one process.
_STEPS_PER_WORKER = 200
# Memory an op of a chunk costs through the host and device views (inputs, sweep, segments, rows),
# with room to spare: measured (tracemalloc's peak over the attribution in one chunk, per op) 73 B
# on CPU traces of 1.0M and 4.0M ops, 95 B on a GPU run of 3.5M ops. A chunk of steps holds a
# quarter of the budget at most; DuckDB's share of the budget bounds the queries apart.
_BYTES_PER_SPAN = 4 * 100


def _step_chunks(store: TableStore, window: int, rows: list[tuple], budget_bytes: int | None) -> list[list[tuple]]:
    """The window's steps (sorted by start) in runs whose spans fit the budget: a step has at most
    as many spans as the window has ops a step."""
    ops = store.rows("SELECT count(*) FROM host_ops WHERE window_index = ?", [window])[0][0]
    per_chunk = memory_budget_bytes(budget_bytes) // _BYTES_PER_SPAN
    steps = max(1, int(per_chunk * len(rows) // max(ops, 1)))
    return [rows[i:i + steps] for i in range(0, len(rows), steps)]


def _attribute_chunk(rows: list[tuple], inputs: tuple, has_device: bool, fork_workers: bool) -> list[dict]:
    # Steps are independent once their spans are loaded: the later ones go to
    # forked workers (both cores; one process on one core).
    n_parts = worker_count(len(rows), _STEPS_PER_WORKER) if fork_workers else 1
    bounds = [len(rows) * i // n_parts for i in range(n_parts + 1)]
    children = []
    try:
        for i in range(1, n_parts):
            children.append(start_part(partial(_attribute_steps, rows[bounds[i]:bounds[i + 1]], inputs, has_device)))
        results = [_attribute_steps(rows[:bounds[1]], inputs, has_device)]
        return results + [finish_part(child) for child in children]
    except BaseException:
        for child in children:
            abandon_part(child)
        raise


def attribute_phases(store: TableStore, fork_workers: bool = True,
                     budget_bytes: int | None = None) -> dict[str, np.ndarray]:
    """The ``phase_spans`` table's columns for every step of ``store`` (``fork_workers``: may split the
    steps between forked processes; ``budget_bytes``: how many steps' spans are loaded at once)."""
    threads = _step_threads(store)
    has_device = store.rows("SELECT count(*) FROM device_ops WHERE kind IN ('kernel', 'memcpy', 'memset')")[0][0] > 0
    steps = store.rows("SELECT window_index, step, start_ns, end_ns FROM steps WHERE end_ns > start_ns "
                       "ORDER BY window_index, start_ns")
    stepped = {w for w, *_ in steps}
    # A window without steps (benchmarks, inference traces) is attributed as one
    # step spanning its events, with step NULL.
    steps += [(w, None, lo, hi) for w, lo, hi in window_extents(store) if w not in stepped]
    by_window: dict[int, list] = {}
    for row in steps:
        by_window.setdefault(row[0], []).append(row)
    parts: dict[str, list[np.ndarray]] = {k: [] for k in _SPAN_COLUMNS}
    for window, window_rows in by_window.items():
        tid = threads.get(window)
        chunks = _step_chunks(store, window, window_rows, budget_bytes)
        for rows in chunks:
            # Each step's spans are those that touch it: a chunk of steps needs only the spans
            # that touch its time (all of the window's, when it is one chunk).
            lo, hi = (min(r[2] for r in rows), max(r[3] for r in rows)) if len(chunks) > 1 else (None, None)
            inputs = (tid, *_window_inputs(store, window, tid, lo, hi),
                      *(_device_inputs(store, window, lo, hi) if has_device else (None, None)))
            for result in _attribute_chunk(rows, inputs, has_device, fork_workers):
                for key, arrays in result.items():
                    parts[key].extend(arrays)
    out = {}
    for key, arrays in parts.items():
        dtype = object if key in ("view", "phase", "cause") else bool if key == "overlapped" else np.int64
        out[key] = np.concatenate(arrays) if arrays else np.zeros(0, dtype=dtype)
    return out


def _attribute_steps(steps: list[tuple], inputs: tuple, has_device: bool) -> dict[str, list[np.ndarray]]:
    """Rows of ``phase_spans`` for some steps of one window (sorted by start), as arrays per column."""
    tid, spans, other, gc, dev, syncs = inputs
    # Arrays of rows, many steps' at once (not one Python call per row: a long
    # trace has hundreds of thousands of spans).
    parts: dict[str, list[np.ndarray]] = {k: [] for k in _SPAN_COLUMNS}

    def add(window, step, view: str, phase: np.ndarray, cause: np.ndarray, start: np.ndarray, end: np.ndarray,
            tid, overlapped: np.ndarray) -> None:
        n = len(start)
        for key, value in (("window_index", np.full(n, _MISSING if window is None else window, np.int64)),
                           ("step", step if isinstance(step, np.ndarray) else
                            np.full(n, _MISSING if step is None else step, np.int64)),
                           ("view", np.full(n, view, dtype=object)), ("phase", phase), ("cause", cause),
                           ("start_ns", start), ("end_ns", end), ("dur_ns", end - start),
                           ("tid", np.full(n, _MISSING if tid is None else tid, np.int64)),
                           ("overlapped", overlapped)):
            parts[key].append(value)

    host_names = np.array(HOST_PHASES, dtype=object)
    device_names = np.array(_DEVICE_LABELS + ("idle",), dtype=object)
    lo_all = np.array([row[2] for row in steps], dtype=np.int64)
    hi_all = np.array([row[3] for row in steps], dtype=np.int64)
    numbers = np.array([_MISSING if row[1] is None else row[1] for row in steps], dtype=np.int64)
    for first, last in disjoint_runs(lo_all, hi_all):
        host = host_segments(lo_all[first:last], hi_all[first:last], spans, other, gc)
        window = steps[first][0]
        if not has_device:  # the host rows of the whole run, in step then time order
            n = len(host.start)
            add(window, numbers[first:last][host.step], "host", host_names[host.label], np.full(n, None, dtype=object),
                host.start, host.end, tid, np.zeros(n, dtype=bool))
            continue
        bounds = np.searchsorted(host.step, np.arange(last - first + 1)).tolist()
        for i, (window, step, lo, hi) in enumerate(steps[first:last]):
            a, b = bounds[i], bounds[i + 1]
            mine = StepSegments(host.step[a:b], host.start[a:b], host.end[a:b], host.label[a:b])
            add(window, step, "host", host_names[mine.label], np.full(b - a, None, dtype=object),
                mine.start, mine.end, tid, np.zeros(b - a, dtype=bool))
            rows = _device_partition(lo, hi, dev, mine, syncs)
            codes = np.array([r[0][0] for r in rows], dtype=np.int64)
            add(window, step, "device", device_names[codes], np.array([r[0][2] for r in rows], dtype=object),
                np.array([r[1] for r in rows], dtype=np.int64), np.array([r[2] for r in rows], dtype=np.int64),
                None, np.array([bool(r[0][1]) for r in rows], dtype=bool) & (codes == 0))
    return parts


def write_attribution(tables_dir, budget_bytes: int | None = None,
                      in_memory: dict[str, dict[str, np.ndarray]] | None = None, strings: list[str] | None = None,
                      fork_workers: bool = True) -> None:
    """Add ``phase_spans`` and ``backward_links`` to a tables directory being built, from its other tables.

    Every parser calls this once its tables are written, before they are
    published; ``in_memory`` tables (codes into ``strings``) are read from
    memory while their files are still being written.
    """
    with TableStore(tables_dir, budget_bytes, in_memory, strings) as store:
        spans = attribute_phases(store, fork_workers, budget_bytes)
        write_backward_links(store, tables_dir)
    # A connection of its own: the store's, after the attribution's queries, ran out of its share
    # of a 256 MiB budget writing the table on 16 cores (an 815 MiB H200 trace).
    replace_table(tables_dir, ATTRIBUTION_TABLE, spans, budget_bytes)
