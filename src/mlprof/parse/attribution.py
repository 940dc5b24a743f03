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
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import numpy as np

from mlprof.parse.phase_rules import idle_cause, is_sync_call, span_phase
from mlprof.parse.workers import abandon_part, finish_part, start_part, worker_count
from mlprof.tables.phases import HOST_PHASES, window_extents
from mlprof.tables.store import TableStore, replace_table

__all__ = ["attribute_phases", "write_attribution"]

_NONE = -1  # no op covers the moment
_NEUTRAL = -2  # ops cover it, none defines a phase
_CODE = {p: i for i, p in enumerate(HOST_PHASES)}
_DEVICE_LABELS = ("compute", "communication", "memcpy", "memset")
_SPAN_COLUMNS = ("window_index", "step", "view", "phase", "cause", "start_ns", "end_ns", "dur_ns", "tid",
                 "overlapped")
_MISSING = -(2**63)  # NULL in integer columns


@dataclass
class _Partition:
    """Contiguous labelled segments covering [lo, hi)."""

    start: np.ndarray
    end: np.ndarray
    label: np.ndarray

    def merged(self) -> "_Partition":
        if len(self.label) <= 1:
            return self
        keep = np.ones(len(self.label), dtype=bool)
        keep[1:] = self.label[1:] != self.label[:-1]
        idx = np.flatnonzero(keep)
        ends = np.append(self.start[idx[1:]], self.end[-1])
        return _Partition(self.start[idx], ends, self.label[idx])


def _union(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sorted disjoint intervals covering the same time."""
    if len(starts) == 0:
        return starts, ends
    order = np.argsort(starts, kind="stable")
    s, e = starts[order], ends[order]
    run_end = np.maximum.accumulate(e)
    new = np.ones(len(s), dtype=bool)
    new[1:] = s[1:] > run_end[:-1]
    idx = np.flatnonzero(new)
    return s[idx], np.append(run_end[idx[1:] - 1], run_end[-1])


def _covered(points: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Whether each point lies in one of the sorted disjoint intervals."""
    if len(starts) == 0:
        return np.zeros(len(points), dtype=bool)
    i = np.searchsorted(starts, points, side="right") - 1
    return (i >= 0) & (points < ends[np.clip(i, 0, None)])


def _overlay(part: _Partition, starts: np.ndarray, ends: np.ndarray, label: int,
             only: tuple[int, ...] | None = None) -> _Partition:
    """Relabel the parts of ``part`` covered by the intervals (only segments labelled ``only``)."""
    if len(starts) == 0:
        return part
    lo, hi = part.start[0], part.end[-1]
    s, e = _union(np.clip(starts, lo, hi), np.clip(ends, lo, hi))
    cuts = np.unique(np.concatenate([part.start, [hi], s, e]))
    cuts = cuts[(cuts >= lo) & (cuts <= hi)]
    pieces_s, pieces_e = cuts[:-1], cuts[1:]
    labels = part.label[np.searchsorted(part.start, pieces_s, side="right") - 1].copy()
    hit = _covered(pieces_s, s, e)
    if only is not None:
        hit &= np.isin(labels, only)
    labels[hit] = label
    return _Partition(pieces_s, pieces_e, labels).merged()


# -- host view ------------------------------------------------------------------
def _sweep(lo: int, hi: int, s: np.ndarray, e: np.ndarray, phase: np.ndarray) -> tuple[_Partition, int | None]:
    """Innermost-defining-span labelling of one step; returns it and the first backward start."""
    order = np.lexsort((-e, s))
    # Plain Python ints, clipped to the step, in sweep order: the loop below
    # runs once per span, and numpy scalars cost several times a list item.
    starts = np.maximum(s[order], lo).tolist()
    ends = np.minimum(e[order], hi).tolist()
    phases = phase[order].tolist()
    owner_of = order.tolist()
    seg_s: list[int] = []
    seg_e: list[int] = []
    seg_l: list[int] = []
    owners: list[int] = []
    # Open spans, innermost last: their ends, effective labels, owners (the
    # defining span's index) and own phases, one list each.
    st_end: list[int] = []
    st_label: list[int] = []
    st_owner: list[int] = []
    st_phase: list[int] = []
    opt_first_bwd: dict[int, int] = {}
    def close_until(limit: int | None, t: int) -> int:
        """Pop the open spans ending at or before ``limit`` (all of them: None), cutting a segment for
        each one's uncovered tail; returns the new cursor."""
        while st_end and (limit is None or st_end[-1] <= limit):
            until = st_end.pop()
            if until > t:
                seg_s.append(t)
                seg_e.append(until)
                seg_l.append(st_label[-1])
                owners.append(st_owner[-1])
                t = until
            st_label.pop()
            st_owner.pop()
            st_phase.pop()
        return t

    t = lo
    first_bwd = None
    bwd = _CODE["backward"]
    opt = _CODE["optimizer"]
    for a, b, p, k in zip(starts, ends, phases, owner_of):
        if b <= a:
            continue
        if st_end and st_end[-1] <= a:  # close the spans that end before this one starts
            t = close_until(a, t)
        if a > t:
            seg_s.append(t)
            seg_e.append(a)
            if st_end:
                seg_l.append(st_label[-1])
                owners.append(st_owner[-1])
            else:
                seg_l.append(_NONE)
                owners.append(-1)
            t = a
        if st_end:
            if st_end[-1] < b:
                b = st_end[-1]  # keep proper nesting
            if p >= 0:
                label, owner = p, k
            else:
                label, owner = st_label[-1], st_owner[-1]
        elif p >= 0:
            label, owner = p, k
        else:
            label, owner = _NEUTRAL, -1
        if p == bwd:
            first_bwd = a if first_bwd is None else min(first_bwd, a)
            for frame_phase, frame_owner in zip(st_phase, st_owner):
                if frame_phase == opt and frame_owner not in opt_first_bwd:
                    opt_first_bwd[frame_owner] = a
        st_end.append(b)
        st_label.append(label)
        st_owner.append(owner)
        st_phase.append(p)
    if st_end:
        t = close_until(None, t)
    if hi > t:
        seg_s.append(t)
        seg_e.append(hi)
        seg_l.append(_NONE)
        owners.append(-1)
    labels = np.array(seg_l, dtype=np.int64)
    if opt_first_bwd:
        # Optimizer.step(closure): what runs in it before its backward is the forward.
        own = np.array(owners, dtype=np.int64)
        ends_arr = np.array(seg_e, dtype=np.int64)
        for owner, bwd_start in opt_first_bwd.items():
            labels[(own == owner) & (ends_arr <= bwd_start) & (labels == opt)] = _CODE["forward"]
    return _Partition(np.array(seg_s, dtype=np.int64), np.array(seg_e, dtype=np.int64), labels), first_bwd


def _host_partition(lo: int, hi: int, spans: _Spans, other: _Spans, gc: _Spans) -> _Partition:
    mine = spans.overlapping(lo, hi)
    part, first_bwd = _sweep(lo, hi, mine["start_ns"], mine["end_ns"], mine["phase"])
    other = other.overlapping(lo, hi)
    obwd = other["phase"] == _CODE["backward"]
    if obwd.any():
        start = int(other["start_ns"][obwd].min())
        first_bwd = start if first_bwd is None else min(first_bwd, start)
    neutral = part.label == _NEUTRAL
    if neutral.any():
        before = part.end <= (first_bwd if first_bwd is not None else hi)
        part.label[neutral & before] = _CODE["forward"]
        part.label[neutral & ~before] = _CODE["other"]
    for phase in ("backward", "communication"):
        m = other["phase"] == _CODE[phase]
        part = _overlay(part, other["start_ns"][m], other["end_ns"][m], _CODE[phase], only=(_NONE,))
    _engine_gaps_are_backward(part)
    part.label[part.label == _NONE] = _CODE["python"]
    gc = gc.overlapping(lo, hi)
    part = _overlay(part, gc["start_ns"], gc["end_ns"], _CODE["gc"])
    return part.merged()


def _engine_gaps_are_backward(part: _Partition) -> None:
    """A gap between two backward nodes is the autograd engine's own work, not Python."""
    label = part.label
    n = len(label)
    gap = label == _NONE
    if not gap.any():
        return
    # Runs of gap segments [first, last], vectorised (a step has thousands of segments).
    first = np.flatnonzero(gap & ~np.r_[False, gap[:-1]])
    last = np.flatnonzero(gap & ~np.r_[gap[1:], False])
    inner = (first > 0) & (last < n - 1)
    first, last = first[inner], last[inner]
    bwd = _CODE["backward"]
    between = (label[first - 1] == bwd) & (label[last + 1] == bwd)
    mark = np.zeros(n + 1, dtype=np.int64)
    np.add.at(mark, first[between], 1)
    np.add.at(mark, last[between] + 1, -1)
    label[np.cumsum(mark[:-1]) > 0] = bwd


# -- device view ----------------------------------------------------------------
def _device_partition(lo: int, hi: int, dev: _Spans, host: _Partition, syncs: tuple) -> list[list]:
    """Rows of ``[(label code, overlapped, idle cause), start_ns, end_ns]`` partitioning the step."""
    dev = dev.overlapping(lo, hi)
    s, e, kind = np.clip(dev["start_ns"], lo, hi), np.clip(dev["end_ns"], lo, hi), dev["kind"]
    # Cut at host phase changes too: an idle gap takes the cause of each host phase it spans.
    cuts = np.unique(np.concatenate([[lo, hi], s, e, host.start]))
    ps, pe = cuts[:-1], cuts[1:]
    label = np.full(len(ps), len(_DEVICE_LABELS), dtype=np.int64)  # idle
    overlapped = np.zeros(len(ps), dtype=bool)
    cover = {}
    for code in range(len(_DEVICE_LABELS) - 1, -1, -1):  # lowest code (compute) wins
        us, ue = _union(s[kind == code], e[kind == code])
        cover[code] = _covered(ps, us, ue)
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
        in_sync = _covered(ps, *_union(sync_s[ssel], sync_e[ssel])) & gap_start
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
        codes[key] = _CODE[phase] if phase else _NEUTRAL
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
            "SELECT window_index, mode(tid) FROM host_ops WHERE name LIKE 'ProfilerStep#%' GROUP BY window_index"):
        out[window] = tid
    return out


def _window_inputs(store: TableStore, window: int, tid: int | None) -> tuple[_Spans, _Spans, _Spans]:
    where = """h.window_index = ? AND h.name NOT LIKE 'ProfilerStep#%' AND h.dur_ns >= 0
               AND (h.category <> 'python_function' OR h.name LIKE 'nn.Module:%')"""
    # Phases are decided per distinct (name, annotation) here, then joined in
    # SQL: a million ops never come back as a million Python strings, and only
    # the spans the sweep uses are fetched. "Child of a step" is a semi-join on
    # the few step ops, not a join of every op with its parent (which built a
    # hash table of every op: 0.2 GB on 4.5M events).
    names = _arrays(store, f"SELECT DISTINCT h.name, coalesce(h.category = 'user_annotation', false) AS annotation "
                           f"FROM host_ops h WHERE {where}", [window])
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
                                                             WHERE name LIKE 'ProfilerStep#%'), false)))
            OR (NOT {on_thread} AND coalesce(h.depth = 0, false) AND f.phase IN ({_CODE["backward"]},
                                                                               {_CODE["communication"]})))
        ORDER BY h.op_id""", [tid, window, tid, tid])
    store.con.unregister("_phases")
    mine = ops["on_thread"].astype(bool)
    phase = ops["phase"].astype(np.int64)
    parts = [(ops["start_ns"][mine], ops["end_ns"][mine], phase[mine])]
    mods = _arrays(store, "SELECT start_ns, end_ns FROM module_calls WHERE window_index = ? AND tid = ? "
                          "AND end_ns IS NOT NULL", [window, tid if tid is not None else -1])
    parts.append((mods["start_ns"], mods["end_ns"], np.full(len(mods["start_ns"]), _CODE["forward"])))
    ranges = _arrays(store, "SELECT start_ns, end_ns, name FROM markers WHERE window_index = ? AND kind = 'range' "
                            "AND end_ns IS NOT NULL AND end_ns >= start_ns AND tid = ?",
                     [window, tid if tid is not None else -1])
    rphase = _phase_codes(ranges["name"], np.ones(len(ranges["name"]), dtype=bool))
    parts.append((ranges["start_ns"][rphase >= 0], ranges["end_ns"][rphase >= 0], rphase[rphase >= 0]))
    spans = {"start_ns": np.concatenate([p[0] for p in parts]).astype(np.int64),
             "end_ns": np.concatenate([p[1] for p in parts]).astype(np.int64),
             "phase": np.concatenate([p[2] for p in parts]).astype(np.int64)}
    # Other threads: their outermost backward and communication work.
    other = {"start_ns": ops["start_ns"][~mine].astype(np.int64), "end_ns": ops["end_ns"][~mine].astype(np.int64),
             "phase": phase[~mine]}
    gc = _arrays(store, "SELECT start_ns, start_ns + dur_ns AS end_ns FROM gc_pauses WHERE window_index = ? "
                        "AND (tid IS NULL OR tid = ?)", [window, tid if tid is not None else -1])
    gc = {k: v.astype(np.int64) for k, v in gc.items()}
    return _Spans(spans), _Spans(other), _Spans(gc)


def _device_inputs(store: TableStore, window: int) -> tuple[dict, tuple]:
    dev = _arrays(store, """
        SELECT start_ns, start_ns + dur_ns AS end_ns,
               CASE WHEN kind = 'kernel' AND NOT coalesce(is_communication, false) THEN 0
                    WHEN kind = 'kernel' THEN 1 WHEN kind = 'memcpy' THEN 2 ELSE 3 END AS kind
        FROM device_ops WHERE window_index = ? AND kind IN ('kernel', 'memcpy', 'memset') AND dur_ns >= 0""",
                  [window])
    calls = _arrays(store, "SELECT start_ns, start_ns + dur_ns AS end_ns, name FROM runtime_calls "
                           "WHERE window_index = ? AND dur_ns > 0", [window])
    sync = np.array([is_sync_call(str(n)) for n in calls["name"]], dtype=bool)
    return (_Spans({k: v.astype(np.int64) for k, v in dev.items()}),
            (calls["start_ns"][sync].astype(np.int64), calls["end_ns"][sync].astype(np.int64)))


# Steps per forked worker below which attribution stays in one process.
_STEPS_PER_WORKER = 200


def attribute_phases(store: TableStore) -> dict[str, np.ndarray]:
    """The ``phase_spans`` table's columns for every step of ``store``."""
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
    for window, rows in by_window.items():
        tid = threads.get(window)
        inputs = (tid, *_window_inputs(store, window, tid),
                  *(_device_inputs(store, window) if has_device else (None, None)))
        # Steps are independent once the window's spans are loaded: the later
        # ones go to forked workers (both cores; one process on one core).
        n_parts = worker_count(len(rows), _STEPS_PER_WORKER)
        bounds = [len(rows) * i // n_parts for i in range(n_parts + 1)]
        children = []
        try:
            for i in range(1, n_parts):
                children.append(start_part(partial(_attribute_steps, rows[bounds[i]:bounds[i + 1]], inputs,
                                                   has_device)))
            results = [_attribute_steps(rows[:bounds[1]], inputs, has_device)]
            results += [finish_part(child) for child in children]
        except BaseException:
            for child in children:
                abandon_part(child)
            raise
        for result in results:
            for key, arrays in result.items():
                parts[key].extend(arrays)
    out = {}
    for key, arrays in parts.items():
        dtype = object if key in ("view", "phase", "cause") else bool if key == "overlapped" else np.int64
        out[key] = np.concatenate(arrays) if arrays else np.zeros(0, dtype=dtype)
    return out


def _attribute_steps(steps: list[tuple], inputs: tuple, has_device: bool) -> dict[str, list[np.ndarray]]:
    """Rows of ``phase_spans`` for some steps of one window, as per-step arrays per column."""
    tid, spans, other, gc, dev, syncs = inputs
    # Per step, arrays of rows (not one Python call per row: a long trace has
    # hundreds of thousands of spans).
    parts: dict[str, list[np.ndarray]] = {k: [] for k in _SPAN_COLUMNS}

    def add(window, step, view: str, phase: np.ndarray, cause: np.ndarray, start: np.ndarray, end: np.ndarray,
            tid, overlapped: np.ndarray) -> None:
        n = len(start)
        for key, value in (("window_index", np.full(n, _MISSING if window is None else window, np.int64)),
                           ("step", np.full(n, _MISSING if step is None else step, np.int64)),
                           ("view", np.full(n, view, dtype=object)), ("phase", phase), ("cause", cause),
                           ("start_ns", start), ("end_ns", end), ("dur_ns", end - start),
                           ("tid", np.full(n, _MISSING if tid is None else tid, np.int64)),
                           ("overlapped", overlapped)):
            parts[key].append(value)

    host_names = np.array(HOST_PHASES, dtype=object)
    device_names = np.array(_DEVICE_LABELS + ("idle",), dtype=object)
    for window, step, lo, hi in steps:
        host = _host_partition(lo, hi, spans, other, gc)
        n = len(host.start)
        add(window, step, "host", host_names[host.label.astype(np.int64)], np.full(n, None, dtype=object),
            host.start.astype(np.int64), host.end.astype(np.int64), tid, np.zeros(n, dtype=bool))
        if has_device:
            rows = _device_partition(lo, hi, dev, host, syncs)
            codes = np.array([r[0][0] for r in rows], dtype=np.int64)
            add(window, step, "device", device_names[codes], np.array([r[0][2] for r in rows], dtype=object),
                np.array([r[1] for r in rows], dtype=np.int64), np.array([r[2] for r in rows], dtype=np.int64),
                None, np.array([bool(r[0][1]) for r in rows], dtype=bool) & (codes == 0))
    return parts


def write_attribution(tables_dir, budget_bytes: int | None = None) -> None:
    """Add ``phase_spans`` to a tables directory being built, from its other tables.

    Every parser calls this once its tables are written, before they are published.
    """
    with TableStore(tables_dir, budget_bytes) as store:
        spans = attribute_phases(store)
    replace_table(tables_dir, "phase_spans", spans, budget_bytes)
