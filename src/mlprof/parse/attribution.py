"""Attribution: every nanosecond of every step gets one phase, decided once.

Run when tables are built; writes the ``phase_spans`` table, which every
analysis, export and page reads (the rules are in :mod:`mlprof.parse.phase_rules`).

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

import numpy as np

from mlprof.parse.phase_rules import HOST_PHASES, idle_cause, is_sync_call, span_phase
from mlprof.tables.store import TableStore, replace_table

__all__ = ["attribute_phases", "window_extents", "write_attribution"]

_NONE = -1  # no op covers the moment
_NEUTRAL = -2  # ops cover it, none defines a phase
_CODE = {p: i for i, p in enumerate(HOST_PHASES)}
_DEVICE_LABELS = ("compute", "communication", "memcpy", "memset")


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
    seg_s, seg_e, seg_l = [], [], []
    stack: list[list] = []  # [end, effective label, owner index (defining span), own phase]
    opt_first_bwd: dict[int, int] = {}
    owners: list[int] = []
    t = lo
    first_bwd = None
    bwd = _CODE["backward"]
    opt = _CODE["optimizer"]

    def emit(until: int) -> None:
        nonlocal t
        if until > t:
            top = stack[-1] if stack else None
            seg_s.append(t)
            seg_e.append(until)
            seg_l.append(top[1] if top else _NONE)
            owners.append(top[2] if top else -1)
            t = until

    for k in order:
        a, b, p = int(s[k]), int(e[k]), int(phase[k])
        a, b = max(a, lo), min(b, hi)
        if b <= a:
            continue
        while stack and stack[-1][0] <= a:
            emit(stack[-1][0])
            stack.pop()
        emit(a)
        if stack:
            b = min(b, stack[-1][0])  # keep proper nesting
        if p >= 0:
            label, owner = p, k
        elif stack:
            label, owner = stack[-1][1], stack[-1][2]
        else:
            label, owner = _NEUTRAL, -1
        if p == bwd:
            first_bwd = a if first_bwd is None else min(first_bwd, a)
            for frame in stack:
                if frame[3] == opt and frame[2] not in opt_first_bwd:
                    opt_first_bwd[frame[2]] = a
        stack.append([b, label, owner, p])
    while stack:
        emit(stack[-1][0])
        stack.pop()
    emit(hi)
    labels = np.array(seg_l, dtype=np.int64)
    if opt_first_bwd:
        # Optimizer.step(closure): what runs in it before its backward is the forward.
        own = np.array(owners, dtype=np.int64)
        ends = np.array(seg_e, dtype=np.int64)
        for owner, bwd_start in opt_first_bwd.items():
            labels[(own == owner) & (ends <= bwd_start) & (labels == opt)] = _CODE["forward"]
    return _Partition(np.array(seg_s, dtype=np.int64), np.array(seg_e, dtype=np.int64), labels), first_bwd


def _host_partition(lo: int, hi: int, spans: dict, other: dict, gc: dict) -> _Partition:
    sel = (spans["start_ns"] < hi) & (spans["end_ns"] > lo)
    part, first_bwd = _sweep(lo, hi, spans["start_ns"][sel], spans["end_ns"][sel], spans["phase"][sel])
    osel = (other["start_ns"] < hi) & (other["end_ns"] > lo)
    obwd = osel & (other["phase"] == _CODE["backward"])
    if obwd.any():
        start = int(other["start_ns"][obwd].min())
        first_bwd = start if first_bwd is None else min(first_bwd, start)
    neutral = part.label == _NEUTRAL
    if neutral.any():
        before = part.end <= (first_bwd if first_bwd is not None else hi)
        part.label[neutral & before] = _CODE["forward"]
        part.label[neutral & ~before] = _CODE["other"]
    for phase in ("backward", "communication"):
        m = osel & (other["phase"] == _CODE[phase])
        part = _overlay(part, other["start_ns"][m], other["end_ns"][m], _CODE[phase], only=(_NONE,))
    _engine_gaps_are_backward(part)
    part.label[part.label == _NONE] = _CODE["python"]
    gsel = (gc["start_ns"] < hi) & (gc["end_ns"] > lo)
    part = _overlay(part, gc["start_ns"][gsel], gc["end_ns"][gsel], _CODE["gc"])
    return part.merged()


def _engine_gaps_are_backward(part: _Partition) -> None:
    """A gap between two backward nodes is the autograd engine's own work, not Python."""
    label = part.label
    bwd = _CODE["backward"]
    i, n = 0, len(label)
    while i < n:
        if label[i] != _NONE:
            i += 1
            continue
        j = i
        while j < n and label[j] == _NONE:
            j += 1
        if i > 0 and j < n and label[i - 1] == bwd and label[j] == bwd:
            label[i:j] = bwd
        i = j


# -- device view ----------------------------------------------------------------
def _device_partition(lo: int, hi: int, dev: dict, host: _Partition, syncs: tuple) -> list[list]:
    """Rows of ``[(label code, overlapped, idle cause), start_ns, end_ns]`` partitioning the step."""
    sel = (dev["start_ns"] < hi) & (dev["end_ns"] > lo)
    s, e, kind = np.clip(dev["start_ns"][sel], lo, hi), np.clip(dev["end_ns"][sel], lo, hi), dev["kind"][sel]
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
    cache: dict[tuple[str, bool], int] = {}
    out = np.empty(len(names), dtype=np.int64)
    for i, (name, ann) in enumerate(zip(names, annotation)):
        key = (str(name), bool(ann))
        code = cache.get(key)
        if code is None:
            phase = span_phase(key[0], key[1])
            code = cache[key] = _CODE[phase] if phase else _NEUTRAL
        out[i] = code
    return out


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


def _window_inputs(store: TableStore, window: int, tid: int | None) -> tuple[dict, dict, dict]:
    ops = _arrays(store, """
        SELECT h.start_ns, h.start_ns + h.dur_ns AS end_ns, h.name, h.category = 'user_annotation' AS annotation,
               h.tid, h.depth, p.name LIKE 'ProfilerStep#%' AS under_step
        FROM host_ops h LEFT JOIN host_ops p ON p.op_id = h.parent_op_id
        WHERE h.window_index = ? AND h.name NOT LIKE 'ProfilerStep#%' AND h.dur_ns >= 0
          AND (h.category <> 'python_function' OR h.name LIKE 'nn.Module:%')""", [window])
    phase = _phase_codes(ops["name"], ops["annotation"])
    top = (ops["depth"] == 0) | (ops["under_step"] == True)  # noqa: E712 - numpy object of bool/None
    on_thread = ops["tid"] == tid if tid is not None else np.zeros(len(phase), dtype=bool)
    keep = on_thread & (top | (phase >= 0))
    parts = [(ops["start_ns"][keep], ops["end_ns"][keep], phase[keep])]
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
    other_sel = ~on_thread & (ops["depth"] == 0) & np.isin(phase, [_CODE["backward"], _CODE["communication"]])
    other = {"start_ns": ops["start_ns"][other_sel].astype(np.int64),
             "end_ns": ops["end_ns"][other_sel].astype(np.int64), "phase": phase[other_sel]}
    gc = _arrays(store, "SELECT start_ns, start_ns + dur_ns AS end_ns FROM gc_pauses WHERE window_index = ? "
                        "AND (tid IS NULL OR tid = ?)", [window, tid if tid is not None else -1])
    gc = {k: v.astype(np.int64) for k, v in gc.items()}
    return spans, other, gc


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
    return ({k: v.astype(np.int64) for k, v in dev.items()},
            (calls["start_ns"][sync].astype(np.int64), calls["end_ns"][sync].astype(np.int64)))


def window_extents(store: TableStore) -> list[tuple[int, int, int]]:
    """(window, first start, last end) of all host and device events of each window with any."""
    return store.rows("""
        SELECT window_index, min(s), max(e) FROM (
            SELECT window_index, start_ns AS s, start_ns + dur_ns AS e FROM host_ops
            UNION ALL SELECT window_index, start_ns, start_ns + dur_ns FROM runtime_calls
            UNION ALL SELECT window_index, start_ns, start_ns + dur_ns FROM device_ops)
        GROUP BY window_index HAVING max(e) > min(s) ORDER BY window_index""")


def attribute_phases(store: TableStore) -> dict[str, np.ndarray]:
    """The ``phase_spans`` table's columns for every step of ``store``."""
    cols: dict[str, list] = {k: [] for k in ("window_index", "step", "view", "phase", "cause", "start_ns",
                                             "end_ns", "dur_ns", "tid", "overlapped")}

    def add(window, step, view, phase, cause, start, end, tid, overlapped) -> None:
        for key, value in (("window_index", window), ("step", step), ("view", view), ("phase", phase),
                           ("cause", cause), ("start_ns", start), ("end_ns", end), ("dur_ns", end - start),
                           ("tid", tid), ("overlapped", overlapped)):
            cols[key].append(value)

    threads = _step_threads(store)
    has_device = store.rows("SELECT count(*) FROM device_ops WHERE kind IN ('kernel', 'memcpy', 'memset')")[0][0] > 0
    steps = store.rows("SELECT window_index, step, start_ns, end_ns FROM steps WHERE end_ns > start_ns "
                       "ORDER BY window_index, start_ns")
    stepped = {w for w, *_ in steps}
    # A window without steps (benchmarks, inference traces) is attributed as one
    # step spanning its events, with step NULL.
    steps += [(w, None, lo, hi) for w, lo, hi in window_extents(store) if w not in stepped]
    loaded: dict[int, tuple] = {}
    for window, step, lo, hi in steps:
        if window not in loaded:
            tid = threads.get(window)
            loaded = {window: (tid, *_window_inputs(store, window, tid),
                               *(_device_inputs(store, window) if has_device else (None, None)))}
        tid, spans, other, gc, dev, syncs = loaded[window]
        host = _host_partition(lo, hi, spans, other, gc)
        for a, b, code in zip(host.start, host.end, host.label):
            add(window, step, "host", HOST_PHASES[int(code)], None, int(a), int(b), tid, False)
        if has_device:
            for (code, overlapped, cause), a, b in _device_partition(lo, hi, dev, host, syncs):
                phase = _DEVICE_LABELS[code] if code < len(_DEVICE_LABELS) else "idle"
                add(window, step, "device", phase, cause, a, b, None, bool(overlapped and code == 0))
    out = {}
    for key, values in cols.items():
        if key in ("view", "phase", "cause"):
            out[key] = np.array(values, dtype=object)
        elif key == "overlapped":
            out[key] = np.array(values, dtype=bool)
        else:
            out[key] = np.array([-(2**63) if v is None else v for v in values], dtype=np.int64)
    return out


def write_attribution(tables_dir) -> None:
    """Add ``phase_spans`` to a tables directory being built, from its other tables.

    Every parser calls this once its tables are written, before they are published.
    """
    with TableStore(tables_dir) as store:
        spans = attribute_phases(store)
    replace_table(tables_dir, "phase_spans", spans)
