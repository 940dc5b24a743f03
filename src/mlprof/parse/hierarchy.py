"""Nesting of host events on their threads: parent, depth and self time.

Host ops on one thread form a tree by time containment. Runtime calls and
allocator events are leaves: they get the innermost op around them (the op
that made the call) and runtime calls count as children for self time, as in
torch's ``key_averages()``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Nesting", "nest_host_events", "assign_steps", "fold_duplicates", "distinct"]


@dataclass
class Nesting:
    parent: np.ndarray  # index of the parent host op, -1 at top level
    depth: np.ndarray  # -1 for ops outside the tree (python_function)
    self_ns: np.ndarray
    leaf_owner: list[np.ndarray]  # per leaf group: index of the innermost host op, -1 if none


_SLICE = 1 << 16  # sorted ops nested at a time: a slice's temporaries are a few MB whatever the trace's size
_NO_KEY = np.iinfo(np.int64).max  # sorts after every key


@dataclass
class _Clock:
    """Threads laid end to end on one time axis: one sortable int64 key per (thread, time)."""

    pid_values: np.ndarray
    tid_values: np.ndarray
    t0: int
    span: int

    def thread(self, pid: np.ndarray, tid: np.ndarray) -> np.ndarray:
        return np.searchsorted(self.pid_values, pid) * len(self.tid_values) + np.searchsorted(self.tid_values, tid)

    def key(self, pid: np.ndarray, tid: np.ndarray, ts: np.ndarray) -> np.ndarray:
        return self.thread(pid, tid) * self.span + (ts - self.t0)


def _slices(n: int) -> list[tuple[int, int]]:
    """Bounds [a, b) of consecutive slices covering range(n); one empty slice when n == 0."""
    return [(a, min(a + _SLICE, n)) for a in range(0, n, _SLICE)] or [(0, 0)]


def distinct(values: np.ndarray, where: np.ndarray | None = None, few: int = 4) -> np.ndarray:
    """``np.unique(values[where])``. A trace has a handful of pids and tids for a million ops:
    up to ``few`` distinct values are found one masked minimum at a time (a pass each, 1.5 ms
    a million), not by ``np.unique`` (18 ms a million, whatever the count)."""
    mask = np.ones(len(values), dtype=bool) if where is None else where.copy()
    found = []
    for _ in range(few):
        if not mask.any():
            return np.array(found, dtype=values.dtype)
        low = values.min(where=mask, initial=np.iinfo(values.dtype).max)
        found.append(low)
        mask &= values != low
    if not mask.any():
        return np.array(found, dtype=values.dtype)
    return np.unique(np.concatenate([np.array(found, dtype=values.dtype), values[mask]]))


def _clock(pid: np.ndarray, tid: np.ndarray, start_ns: np.ndarray, dur_ns: np.ndarray, tree: np.ndarray,
           points: list[tuple[np.ndarray, np.ndarray, np.ndarray]]) -> _Clock | None:
    """The clock over the tree ops and the points; None when there is nothing to nest or place."""
    times = [ts for _, _, ts in points if len(ts)]
    if not tree.any() and not times:
        return None
    pid_values = np.unique(np.concatenate([distinct(pid, tree)] + [distinct(p) for p, _, _ in points]))
    tid_values = np.unique(np.concatenate([distinct(tid, tree)] + [distinct(t) for _, t, _ in points]))
    t0 = min([int(start_ns.min(where=tree, initial=_NO_KEY))] + [int(ts.min()) for ts in times])
    t1 = max([int((start_ns + dur_ns).max(where=tree, initial=t0))] + [int(ts.max()) for ts in times])
    clock = _Clock(pid_values, tid_values, t0, t1 - t0 + 1)
    top = max([int(clock.thread(pid[a:b], tid[a:b]).max(where=tree[a:b], initial=-1)) for a, b in _slices(len(pid))]
              + [int(clock.thread(p, t).max()) for p, t, ts in points if len(ts)])
    if (top + 1) * clock.span >= 2**62:
        raise OverflowError("trace spans too long a time to nest")
    return clock


def _sorted_ops(clock: _Clock, pid: np.ndarray, tid: np.ndarray, start_ns: np.ndarray, dur_ns: np.ndarray,
                tree: np.ndarray, n_tree: int) -> np.ndarray:
    """Indices of the ``n_tree`` tree ops, by thread, then start, longer first.

    One stable argsort of the keys (a trace already in time order costs one
    pass), then only the runs of equal keys are ordered by duration:
    ``np.lexsort`` sorted every duration first, the nesting's slowest step.
    """
    key = np.empty(len(start_ns), dtype=np.int64)
    for a, b in _slices(len(start_ns)):
        key[a:b] = np.where(tree[a:b], clock.key(pid[a:b], tid[a:b], start_ns[a:b]), _NO_KEY)
    order = np.argsort(key, kind="stable")
    in_run = np.zeros(n_tree + 1, dtype=bool)
    for a, b in _slices(n_tree):
        k = key[order[a:b + 1]]  # one past the slice: a run may cross its end
        same = np.flatnonzero(k[1:] == k[:-1]) + a
        in_run[same] = in_run[same + 1] = True
    tied = np.flatnonzero(in_run)
    del in_run
    if len(tied):
        ops = order[tied]
        order[tied] = ops[np.lexsort((-dur_ns[ops], key[ops]))]
    del key
    # Held through the whole sweep, beside its outputs: int32 where op indices fit.
    return order[:n_tree].astype(np.int32 if len(start_ns) < 2**31 else np.int64)


@dataclass
class _Levels:
    """Positions grouped by level (a depth), each group in ascending order."""

    order: np.ndarray
    bounds: np.ndarray  # level d is order[bounds[d - low]:bounds[d - low + 1]]
    low: int

    @classmethod
    def of(cls, level: np.ndarray) -> _Levels:
        if not len(level):
            return cls(np.zeros(0, dtype=np.int64), np.zeros(1, dtype=np.int64), 0)
        low = int(level.min())
        order = np.argsort(level, kind="stable")
        return cls(order, np.searchsorted(level[order], np.arange(low, int(level.max()) + 2)), low)

    @property
    def high(self) -> int:
        return self.low + len(self.bounds) - 2

    def shifted(self, by: int) -> _Levels:
        return _Levels(self.order, self.bounds, self.low + by)

    def at(self, d: int) -> np.ndarray:
        i = d - self.low
        if not 0 <= i < len(self.bounds) - 1:
            return self.order[:0]
        return self.order[self.bounds[i]:self.bounds[i + 1]]


def _innermost(ops: np.ndarray, levels: _Levels, last_op: np.ndarray, want: _Levels,
               before: np.ndarray) -> np.ndarray:
    """Per query (grouped by ``want`` level): the last op of the slice at that level before
    position ``before``, else the last op at that level in the slices before (-1: none)."""
    out = np.full(len(before), -1, dtype=np.int64)
    for d in range(max(want.low, 0), want.high + 1):
        q = want.at(d)
        positions = levels.at(d)
        k = np.searchsorted(positions, before[q], side="left") - 1
        inside = k >= 0
        out[q[inside]] = ops[positions[k[inside]]]
        if d < len(last_op):
            out[q[~inside]] = last_op[d]
    return out


@dataclass
class _Points:
    """Time points to place among the ops (zero-length ops, leaves), in key order."""

    key: np.ndarray
    order: np.ndarray  # into the caller's arrays
    owner: np.ndarray  # innermost op open at the point, -1 if none
    open_count: np.ndarray  # ops open at the point

    @classmethod
    def of(cls, clock: _Clock, pid: np.ndarray, tid: np.ndarray, ts: np.ndarray) -> _Points:
        key = clock.key(pid, tid, ts)
        order = np.argsort(key, kind="stable")
        return cls(key[order], order, np.full(len(ts), -1, dtype=np.int64), np.zeros(len(ts), dtype=np.int64))


def _sweep(clock: _Clock, order: np.ndarray, pid: np.ndarray, tid: np.ndarray, start_ns: np.ndarray,
           dur_ns: np.ndarray, parent: np.ndarray, depth: np.ndarray, child_ns: np.ndarray,
           points: list[_Points]) -> None:
    """Nest the sorted tree ops and place the points, one slice of the order at a time.

    Each slice is nested as a whole; what it needs from the slices before is
    small: the ends of the ops still open at its first start, and per depth
    the last op there. A point goes to the slice that holds the ops started
    before it.
    """
    bounds = _slices(len(order))
    firsts = order[[a for a, _ in bounds[1:]]]
    first_keys = clock.key(pid[firsts], tid[firsts], start_ns[firsts])
    cuts = [np.concatenate([[0], np.searchsorted(p.key, first_keys, side="left"), [len(p.key)]]) for p in points]
    carry = np.zeros(0, dtype=np.int64)  # ends of earlier ops still open
    last_op = np.zeros(0, dtype=np.int64)  # per depth: the last earlier op there, -1 if none
    for s, (a, b) in enumerate(bounds):
        ops = order[a:b]
        ks = clock.key(pid[ops], tid[ops], start_ns[ops])
        ends = np.sort(np.concatenate([carry, ks + dur_ns[ops]]))
        level = len(carry) + np.arange(b - a) - np.searchsorted(ends, ks, side="right")
        levels = _Levels.of(level)
        up = _innermost(ops, levels, last_op, levels.shifted(-1), np.arange(b - a))
        depth[ops] = level
        inside = up >= 0
        parent[ops[inside]] = up[inside]
        np.add.at(child_ns, up[inside], dur_ns[ops[inside]])
        for p, cut in zip(points, cuts):
            lo, hi = cut[s], cut[s + 1]
            before = np.searchsorted(ks, p.key[lo:hi], side="right")
            p.open_count[lo:hi] = len(carry) + before - np.searchsorted(ends, p.key[lo:hi], side="right")
            p.owner[lo:hi] = _innermost(ops, levels, last_op, _Levels.of(p.open_count[lo:hi] - 1), before)
        if levels.high >= len(last_op):
            last_op = np.concatenate([last_op, np.full(levels.high + 1 - len(last_op), -1, dtype=np.int64)])
        for d in range(levels.low, levels.high + 1):
            at = levels.at(d)
            if len(at):
                last_op[d] = ops[at[-1]]
        if s + 1 < len(bounds):
            carry = ends[np.searchsorted(ends, first_keys[s], side="right"):]


def nest_host_events(
    pid: np.ndarray,
    tid: np.ndarray,
    start_ns: np.ndarray,
    dur_ns: np.ndarray,
    in_tree: np.ndarray,
    leaves: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, bool]],
) -> Nesting:
    """Nest host ops (``in_tree`` selects which take part) and attach leaves.

    ``leaves`` holds (pid, tid, start_ns, dur_ns, counts_as_child) per group.

    Vectorised, no loop per event: on one thread, sorted by start (longer
    first), an op's depth is the number of earlier ops still open at its
    start, and its parent is the last earlier op one level up. Ops of zero
    duration cannot contain anything and are placed like leaves. The sorted
    ops are nested in slices, so that the temporaries stay small beside the
    outputs on traces of millions of ops.
    """
    tree = in_tree & (dur_ns > 0)
    point_idx = np.flatnonzero(in_tree & ~tree)
    groups = [(pid[point_idx], tid[point_idx], start_ns[point_idx])] + [leaf[:3] for leaf in leaves]
    clock = _clock(pid, tid, start_ns, dur_ns, tree, groups)
    order = _sorted_ops(clock, pid, tid, start_ns, dur_ns, tree, int(tree.sum())) if clock else None
    del tree
    # The outputs are made after the sort, whose keys are the other large arrays.
    n_ops = len(start_ns)
    parent = np.full(n_ops, -1, dtype=np.int64)
    depth = np.full(n_ops, -1, dtype=np.int32)
    owners = [np.full(len(leaf[2]), -1, dtype=np.int64) for leaf in leaves]
    if clock is None:
        return Nesting(parent, depth, dur_ns.copy(), owners)
    points = [_Points.of(clock, *group) for group in groups]
    del groups
    child_ns = np.zeros(n_ops, dtype=np.int64)
    _sweep(clock, order, pid, tid, start_ns, dur_ns, parent, depth, child_ns, points)
    del order
    placed = points.pop(0)
    parent[point_idx[placed.order]] = placed.owner
    depth[point_idx[placed.order]] = placed.open_count
    for leaf, owner, p in zip(leaves, owners, points):
        owner[p.order] = p.owner
        if leaf[4]:
            inside = owner >= 0
            np.add.at(child_ns, owner[inside], leaf[3][inside])
    self_ns = np.subtract(dur_ns, child_ns, out=child_ns)  # in place: the child time is not needed past here
    return Nesting(parent, depth, self_ns, owners)


def assign_steps(ts_ns: np.ndarray, step_start: np.ndarray, step_end: np.ndarray,
                 step_number: np.ndarray, missing: int) -> np.ndarray:
    """Step number of each time point (``missing`` outside every step).

    Steps must be sorted by start and not overlap. Points are looked up a
    slice at a time: the result is the only array as long as ``ts_ns``.
    """
    out = np.full(len(ts_ns), missing, dtype=np.int64)
    if len(step_start) == 0:
        return out
    for a, b in _slices(len(ts_ns)):
        idx = np.searchsorted(step_start, ts_ns[a:b], side="right") - 1
        ok = idx >= 0
        safe = np.where(ok, idx, 0)
        ok &= ts_ns[a:b] < step_end[safe]
        out[a:b][ok] = step_number[safe[ok]]
    return out


def fold_duplicates(name: np.ndarray, parent: np.ndarray, depth: np.ndarray,
                    self_ns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """torch's key_averages() rule for nested calls of the same op.

    An op whose parent has the same name and no other child op is folded into
    the parent (``aten::div_`` calling ``aten::div_``): it is not counted, and
    its self time is added to the parent's. Returns (folded, folded_self_ns).
    """
    n = len(name)
    only_child = np.bincount(parent[parent >= 0], minlength=n) == 1
    folded = np.zeros(n, dtype=bool)
    for a, b in _slices(n):  # the parent's name and child count are gathered a slice at a time
        up = parent[a:b]
        safe = np.where(up >= 0, up, 0)
        folded[a:b] = (up >= 0) & (name[a:b] == name[safe]) & only_child[safe]
    folded_self = self_ns.copy()
    if folded.any():
        # Deepest first, so a chain a > a > a folds all the way up.
        for d in sorted(set(depth[folded].tolist()), reverse=True):
            idx = np.flatnonzero(folded & (depth == d))
            np.add.at(folded_self, parent[idx], folded_self[idx])
    return folded, folded_self
