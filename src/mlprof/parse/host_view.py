"""The host view of attribution, for a run of consecutive steps at once.

The rules are those of :mod:`mlprof.parse.attribution` (its docstring says
them); this module applies them to many steps in one pass of numpy over all
their spans, with one Python loop for the nesting sweep, instead of a few
dozen numpy calls a step (a 1.1M-event trace has 1,100 steps of a few hundred
spans: the per-step calls were most of the attribution's time).

Steps must not overlap one another (:func:`disjoint_runs` cuts a window's
steps into such runs). A span that crosses steps counts in each, cut to it,
as when each step was attributed on its own.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mlprof.tables.phases import HOST_PHASES

__all__ = ["NO_OP", "NEUTRAL", "PHASE_CODE", "StepSegments", "disjoint_runs", "host_segments", "sorted_unique",
           "union_intervals", "covered"]

NO_OP = -1  # no op covers the moment
NEUTRAL = -2  # ops cover it, none defines a phase
PHASE_CODE = {p: i for i, p in enumerate(HOST_PHASES)}


@dataclass
class StepSegments:
    """Labelled segments; those of one step are contiguous and cover it exactly, in time order."""

    step: np.ndarray  # index of the step in the run
    start: np.ndarray
    end: np.ndarray
    label: np.ndarray

    def merged(self) -> StepSegments:
        """Neighbours of one step with the same label as one segment."""
        if len(self.label) <= 1:
            return self
        keep = np.ones(len(self.label), dtype=bool)
        keep[1:] = (self.label[1:] != self.label[:-1]) | (self.step[1:] != self.step[:-1])
        idx = np.flatnonzero(keep)
        ends = self.end[np.append(idx[1:] - 1, len(self.label) - 1)]
        return StepSegments(self.step[idx], self.start[idx], ends, self.label[idx])


def sorted_unique(values: np.ndarray) -> np.ndarray:
    """``np.unique`` of an integer array by sort: NumPy 2.3+ finds distinct values by hashing first,
    40x slower on 800,000 mostly distinct times (0.6 s against 15 ms)."""
    values = np.sort(values)
    if len(values) > 1:
        values = values[np.r_[True, values[1:] != values[:-1]]]
    return values


def union_intervals(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
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


def covered(points: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Whether each point lies in one of the sorted disjoint intervals."""
    if len(starts) == 0:
        return np.zeros(len(points), dtype=bool)
    i = np.searchsorted(starts, points, side="right") - 1
    return (i >= 0) & (points < ends[np.clip(i, 0, None)])


def disjoint_runs(lo: np.ndarray, hi: np.ndarray) -> list[tuple[int, int]]:
    """[first, last) index ranges of steps (sorted by start) in which no step overlaps the one before it."""
    if len(lo) == 0:
        return []
    cut = np.flatnonzero(lo[1:] < np.maximum.accumulate(hi)[:-1]) + 1
    bounds = [0, *cut.tolist(), len(lo)]
    return list(zip(bounds[:-1], bounds[1:]))


def _per_step(lo: np.ndarray, hi: np.ndarray, s: np.ndarray, e: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For intervals [s, e): (step, interval index) of each step each overlaps (start < hi and end > lo)."""
    first = np.searchsorted(hi, s, side="right")
    last = np.searchsorted(lo, e, side="left") - 1
    count = np.maximum(last - first + 1, 0)
    idx = np.repeat(np.arange(len(s)), count)
    within = np.arange(len(idx)) - np.repeat(np.cumsum(count) - count, count)
    return np.repeat(first, count) + within, idx


def _clipped(lo, hi, spans: dict[str, np.ndarray], phase: int | None = None):
    """The spans (of ``phase``, if given) cut to each step they overlap: step, start, end."""
    s, e = spans["start_ns"], spans["end_ns"]
    if phase is not None:
        keep = spans["phase"] == phase
        s, e = s[keep], e[keep]
    k, idx = _per_step(lo, hi, s, e)
    return k, np.maximum(s[idx], lo[k]), np.minimum(e[idx], hi[k])


def _sweep(lo: np.ndarray, hi: np.ndarray, spans: dict[str, np.ndarray]) -> tuple[StepSegments, np.ndarray]:
    """Innermost-defining-span labelling of every step; with each step's first backward start (hi if none)."""
    k, idx = _per_step(lo, hi, spans["start_ns"], spans["end_ns"])
    s, e = spans["start_ns"][idx], spans["end_ns"][idx]
    # Per step: by start, the longer first, then in the order given (a tie's outer span is the first one).
    order = np.lexsort((idx, -e, s, k))
    k, s, e, idx = k[order], s[order], e[order], idx[order]
    start, end, phase = np.maximum(s, lo[k]), np.minimum(e, hi[k]), spans["phase"][idx]
    nested = _nested_sweep(lo, hi, k, start, end, phase)
    return nested if nested is not None else _stack_sweep(lo, hi, k, start, end, phase)


def _nested_sweep(lo: np.ndarray, hi: np.ndarray, k: np.ndarray, start: np.ndarray, end: np.ndarray,
                  phase: np.ndarray) -> tuple[StepSegments, np.ndarray] | None:
    """:func:`_stack_sweep`'s result in numpy, when the spans nest (None when one overlaps the end of the
    span it starts in, which the stack sweep cuts short: then it must run).

    Nested spans make a forest. Every span's start and end is a cut, so the
    segments are the intervals between consecutive cuts, each labelled by the
    innermost span around it: a span's own phase, else the nearest enclosing
    one's that defines a phase, else neutral (ops but no phase) or no op.
    """
    keep = end > start  # empty spans cut nothing
    k, start, end, phase = k[keep], start[keep], end[keep], phase[keep]
    n = len(start)
    pos = np.arange(n, dtype=np.int64)
    # Spans are sorted by start, steps disjoint: those open when span j starts are the earlier ones
    # not ended by then, and every span ended by then comes earlier.
    depth = pos - np.searchsorted(np.sort(end), start, side="right")
    # The parent: the last earlier span one level up (depth and position as one sort key).
    width = max(n, 1)
    key = np.sort(depth * width + pos)
    below = depth > 0
    parent = np.full(n, -1, dtype=np.int64)
    at = np.searchsorted(key, (depth[below] - 1) * width + pos[below], side="left") - 1
    if (at < 0).any():
        return None
    cand = key[at]
    parent[below] = cand % width
    if ((cand // width) != depth[below] - 1).any() or (end[below] > end[parent[below]]).any() \
            or (k[below] != k[parent[below]]).any():
        return None  # not nested: the stack sweep clips such a span to its parent
    label = np.where(phase >= 0, phase, NEUTRAL)
    owner = np.where(phase >= 0, pos, -1)
    inherit = np.flatnonzero((phase < 0) & below)
    if len(inherit):  # level by level, parents before children
        inherit = inherit[np.argsort(depth[inherit], kind="stable")]
        for group in np.split(inherit, np.flatnonzero(np.diff(depth[inherit])) + 1):
            label[group] = label[parent[group]]
            owner[group] = owner[parent[group]]
    cuts = sorted_unique(np.concatenate([lo, hi, start, end]))
    seg_s, seg_e = cuts[:-1], cuts[1:]
    step = np.searchsorted(hi, seg_s, side="right")
    inside = step < len(hi)
    inside[inside] = lo[step[inside]] <= seg_s[inside]
    seg_s, seg_e, step = seg_s[inside], seg_e[inside], step[inside]
    # The innermost span around each segment: the last one started by then, or its nearest
    # ancestor not yet ended.
    cur = np.searchsorted(start, seg_s, side="right") - 1
    ok = cur >= 0
    ok[ok] = k[cur[ok]] == step[ok]
    cur[~ok] = -1
    while True:
        live = np.flatnonzero(cur >= 0)
        ended = live[end[cur[live]] <= seg_s[live]]
        if not len(ended):
            break
        cur[ended] = parent[cur[ended]]
    has = cur >= 0
    seg_l = np.where(has, label[np.where(has, cur, 0)], NO_OP) if n else np.full(len(seg_s), NO_OP)
    first_bwd = hi.copy()
    bwd, opt = PHASE_CODE["backward"], PHASE_CODE["optimizer"]
    is_bwd = np.flatnonzero(phase == bwd)
    np.minimum.at(first_bwd, k[is_bwd], start[is_bwd])
    if len(is_bwd) and (phase == opt).any():
        # Optimizer.step(closure): what runs in it before its backward is the forward.
        opt_bwd = np.full(n, np.iinfo(np.int64).min, dtype=np.int64)
        first_in = np.full(n, np.iinfo(np.int64).max, dtype=np.int64)
        node, at_ns = parent[is_bwd], start[is_bwd]
        while len(node):
            up = node >= 0
            node, at_ns = node[up], at_ns[up]
            hit = phase[node] == opt
            np.minimum.at(first_in, node[hit], at_ns[hit])
            node = parent[node]
        found = first_in != np.iinfo(np.int64).max
        opt_bwd[found] = first_in[found]
        seg_owner = np.where(has, owner[np.where(has, cur, 0)], -1)
        limit = np.where(seg_owner >= 0, opt_bwd[np.maximum(seg_owner, 0)], np.iinfo(np.int64).min)
        seg_l[(seg_l == opt) & (seg_e <= limit)] = PHASE_CODE["forward"]
    return StepSegments(step.astype(np.int64), seg_s, seg_e, seg_l.astype(np.int64)), first_bwd


def _stack_sweep(lo: np.ndarray, hi: np.ndarray, k: np.ndarray, start: np.ndarray, end: np.ndarray,
                 phase: np.ndarray) -> tuple[StepSegments, np.ndarray]:
    """The sweep with a stack of open spans, span by span (``k``, ``start``, ``end``, ``phase``: the spans
    cut to their steps, in :func:`_sweep`'s order); it also takes spans that do not nest."""
    # Plain Python ints: the loop below runs once per span.
    starts = start.tolist()
    ends = end.tolist()
    phases = phase.tolist()
    bounds = np.searchsorted(k, np.arange(len(lo) + 1)).tolist()
    seg_k: list[int] = []
    seg_s: list[int] = []
    seg_e: list[int] = []
    seg_l: list[int] = []
    owners: list[int] = []
    first_bwd = hi.tolist()
    opt_first_bwd: dict[int, int] = {}
    bwd, opt = PHASE_CODE["backward"], PHASE_CODE["optimizer"]
    # Open spans, innermost last: their ends, effective labels, owners (the
    # defining span's position) and own phases, one list each (empty between steps).
    st_end: list[int] = []
    st_label: list[int] = []
    st_owner: list[int] = []
    st_phase: list[int] = []

    def close_until(limit: int | None, t: int, step: int) -> int:
        """Pop the open spans ending at or before ``limit`` (all of them: None), cutting a segment
        for each one's uncovered tail; returns the new cursor."""
        while st_end and (limit is None or st_end[-1] <= limit):
            until = st_end.pop()
            if until > t:
                seg_k.append(step)
                seg_s.append(t)
                seg_e.append(until)
                seg_l.append(st_label[-1])
                owners.append(st_owner[-1])
                t = until
            st_label.pop()
            st_owner.pop()
            st_phase.pop()
        return t

    for step, (step_lo, step_hi) in enumerate(zip(lo.tolist(), hi.tolist())):
        t = step_lo
        step_bwd = None
        for j in range(bounds[step], bounds[step + 1]):
            a, b, p = starts[j], ends[j], phases[j]
            if b <= a:
                continue
            if st_end and st_end[-1] <= a:  # close the spans that end before this one starts
                t = close_until(a, t, step)
            if a > t:
                seg_k.append(step)
                seg_s.append(t)
                seg_e.append(a)
                if st_end:
                    seg_l.append(st_label[-1])
                    owners.append(st_owner[-1])
                else:
                    seg_l.append(NO_OP)
                    owners.append(-1)
                t = a
            if st_end:
                if st_end[-1] < b:
                    b = st_end[-1]  # keep proper nesting
                if p >= 0:
                    label, owner = p, j
                else:
                    label, owner = st_label[-1], st_owner[-1]
            elif p >= 0:
                label, owner = p, j
            else:
                label, owner = NEUTRAL, -1
            if p == bwd:
                step_bwd = a if step_bwd is None else min(step_bwd, a)
                for frame_phase, frame_owner in zip(st_phase, st_owner):
                    if frame_phase == opt and frame_owner not in opt_first_bwd:
                        opt_first_bwd[frame_owner] = a
            st_end.append(b)
            st_label.append(label)
            st_owner.append(owner)
            st_phase.append(p)
        if st_end:
            t = close_until(None, t, step)
        if step_hi > t:
            seg_k.append(step)
            seg_s.append(t)
            seg_e.append(step_hi)
            seg_l.append(NO_OP)
            owners.append(-1)
        if step_bwd is not None:
            first_bwd[step] = step_bwd
    labels = np.array(seg_l, dtype=np.int64)
    seg_ends = np.array(seg_e, dtype=np.int64)
    if opt_first_bwd:
        # Optimizer.step(closure): what runs in it before its backward is the forward.
        own = np.array(owners, dtype=np.int64)
        for owner, bwd_start in opt_first_bwd.items():
            labels[(own == owner) & (seg_ends <= bwd_start) & (labels == opt)] = PHASE_CODE["forward"]
    part = StepSegments(np.array(seg_k, dtype=np.int64), np.array(seg_s, dtype=np.int64), seg_ends, labels)
    return part, np.array(first_bwd, dtype=np.int64)


def _overlay(part: StepSegments, starts: np.ndarray, ends: np.ndarray, label: int,
             only: tuple[int, ...] | None = None) -> StepSegments:
    """Relabel the time of ``part`` the intervals cover (cut to the steps; only segments labelled ``only``)."""
    if len(starts) == 0:
        return part
    s, e = union_intervals(starts, ends)
    cuts = sorted_unique(np.concatenate([part.start, part.end, s, e]))
    pieces_s, pieces_e = cuts[:-1], cuts[1:]
    seg = np.searchsorted(part.start, pieces_s, side="right") - 1
    # Pieces between two steps belong to none.
    inside = (seg >= 0) & (pieces_s < part.end[np.clip(seg, 0, None)])
    pieces_s, pieces_e, seg = pieces_s[inside], pieces_e[inside], seg[inside]
    labels = part.label[seg]
    hit = covered(pieces_s, s, e)
    if only is not None:
        hit &= np.isin(labels, only)
    labels[hit] = label
    return StepSegments(part.step[seg], pieces_s, pieces_e, labels).merged()


def _engine_gaps_are_backward(part: StepSegments) -> None:
    """A gap between two backward nodes of one step is the autograd engine's own work, not Python."""
    label, step = part.label, part.step
    gap = label == NO_OP
    if not gap.any():
        return
    n = len(label)
    same_prev = np.r_[False, step[1:] == step[:-1]]
    same_next = np.r_[step[:-1] == step[1:], False]
    # Runs of gap segments [first, last] inside one step, vectorised.
    first = np.flatnonzero(gap & ~(np.r_[False, gap[:-1]] & same_prev))
    last = np.flatnonzero(gap & ~(np.r_[gap[1:], False] & same_next))
    inner = same_prev[first] & same_next[last]
    first, last = first[inner], last[inner]
    bwd = PHASE_CODE["backward"]
    between = (label[first - 1] == bwd) & (label[last + 1] == bwd)
    mark = np.zeros(n + 1, dtype=np.int64)
    np.add.at(mark, first[between], 1)
    np.add.at(mark, last[between] + 1, -1)
    label[np.cumsum(mark[:-1]) > 0] = bwd


def host_segments(lo: np.ndarray, hi: np.ndarray, spans: dict[str, np.ndarray], other: dict[str, np.ndarray],
                  gc: dict[str, np.ndarray]) -> StepSegments:
    """The host view of steps [lo, hi) (sorted, none overlapping another).

    ``spans``: the step thread's phase-defining spans and ops (start_ns, end_ns,
    phase code or NEUTRAL), in the order that breaks ties of nesting; ``other``:
    other threads' outermost backward and communication; ``gc``: the thread's
    collector pauses (start_ns, end_ns).
    """
    part, first_bwd = _sweep(lo, hi, spans)
    bwd = PHASE_CODE["backward"]
    obwd = other["phase"] == bwd
    if obwd.any():
        k, idx = _per_step(lo, hi, other["start_ns"][obwd], other["end_ns"][obwd])
        # Another thread's backward that began before the step still marks its start.
        np.minimum.at(first_bwd, k, other["start_ns"][obwd][idx])
    neutral = part.label == NEUTRAL
    if neutral.any():
        before = part.end <= first_bwd[part.step]
        part.label[neutral & before] = PHASE_CODE["forward"]
        part.label[neutral & ~before] = PHASE_CODE["other"]
    for phase in ("backward", "communication"):
        _, s, e = _clipped(lo, hi, other, PHASE_CODE[phase])
        part = _overlay(part, s, e, PHASE_CODE[phase], only=(NO_OP,))
    _engine_gaps_are_backward(part)
    part.label[part.label == NO_OP] = PHASE_CODE["python"]
    _, s, e = _clipped(lo, hi, gc)
    return _overlay(part, s, e, PHASE_CODE["gc"]).merged()
