"""Nesting of host events on their threads: parent, depth and self time.

Host ops on one thread form a tree by time containment. Runtime calls and
allocator events are leaves: they get the innermost op around them (the op
that made the call) and runtime calls count as children for self time, as in
torch's ``key_averages()``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Nesting", "nest_host_events", "assign_steps", "fold_duplicates"]


@dataclass
class Nesting:
    parent: np.ndarray  # index of the parent host op, -1 at top level
    depth: np.ndarray  # -1 for ops outside the tree (python_function)
    self_ns: np.ndarray
    leaf_owner: list[np.ndarray]  # per leaf group: index of the innermost host op, -1 if none


def _thread_codes(pids: list[np.ndarray], tids: list[np.ndarray]) -> list[np.ndarray]:
    """One code per (pid, tid) pair, the same across the parts.

    Codes are looked up in the few distinct values (not an inverse of
    ``np.unique`` over all parts stacked, whose sort and copies were the
    nesting's peak: 0.3 GB on 4.5M ops).
    """
    pid_values = np.unique(np.concatenate([np.unique(p) for p in pids]))
    tid_values = np.unique(np.concatenate([np.unique(t) for t in tids]))
    return [np.searchsorted(pid_values, p) * len(tid_values) + np.searchsorted(tid_values, t)
            for p, t in zip(pids, tids)]


def _last_at_depth(depth_sorted: np.ndarray, want_depth: np.ndarray, before: np.ndarray) -> np.ndarray:
    """For each query: the last sorted position p < before[q] with depth p == want_depth[q] (-1 if none)."""
    out = np.full(len(want_depth), -1, dtype=np.int64)
    valid = want_depth >= 0
    if not valid.any():
        return out
    order = np.argsort(depth_sorted, kind="stable")  # positions grouped by depth, ascending inside
    bounds = np.searchsorted(depth_sorted[order], np.arange(depth_sorted.max() + 2))
    for d in np.unique(want_depth[valid]).tolist():
        positions = order[bounds[d]:bounds[d + 1]]
        q = np.flatnonzero(want_depth == d)
        k = np.searchsorted(positions, before[q], side="left") - 1
        ok = k >= 0
        out[q[ok]] = positions[k[ok]]
    return out


def _parents_sorted(depth_sorted: np.ndarray) -> np.ndarray:
    """For each sorted position: the last earlier position one level up (-1 at depth 0).

    The same answer as ``_last_at_depth(d, d - 1, arange)``, without its three
    per-op query arrays: the children of depth d are the positions at d + 1.
    """
    out = np.full(len(depth_sorted), -1, dtype=np.int64)
    if not len(depth_sorted):
        return out
    order = np.argsort(depth_sorted, kind="stable")
    top = int(depth_sorted.max())
    bounds = np.searchsorted(depth_sorted[order], np.arange(top + 2))
    for d in range(top):
        positions = order[bounds[d]:bounds[d + 1]]
        children = order[bounds[d + 1]:bounds[d + 2]]
        k = np.searchsorted(positions, children, side="left") - 1
        ok = k >= 0
        out[children[ok]] = positions[k[ok]]
    return out


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
    duration cannot contain anything and are placed like leaves.
    """
    n_ops = len(start_ns)
    parent = np.full(n_ops, -1, dtype=np.int64)
    depth = np.full(n_ops, -1, dtype=np.int32)
    child_ns = np.zeros(n_ops, dtype=np.int64)
    owners = [np.full(len(leaf[2]), -1, dtype=np.int64) for leaf in leaves]
    tree_idx = np.flatnonzero(in_tree & (dur_ns > 0))
    point_idx = np.flatnonzero(in_tree & (dur_ns <= 0))
    groups = [(pid[point_idx], tid[point_idx], start_ns[point_idx])] + [(lf[0], lf[1], lf[2]) for lf in leaves]
    threads = _thread_codes([pid[tree_idx]] + [g[0] for g in groups], [tid[tree_idx]] + [g[1] for g in groups])
    all_times = [start_ns[tree_idx]] + [g[2] for g in groups]
    present = [t for t in all_times if len(t)]
    del all_times
    if not present:
        return Nesting(parent, depth, dur_ns.copy(), owners)
    t0 = min(int(t.min()) for t in present)
    t1 = max(int((start_ns[tree_idx] + dur_ns[tree_idx]).max()) if len(tree_idx) else t0,
             max(int(t.max()) for t in present))
    del present
    # One sortable key per (thread, time): threads laid end to end on one axis.
    span = t1 - t0 + 1
    n_threads = max(int(t.max()) for t in threads if len(t)) + 1
    if n_threads * span >= 2**62:
        raise OverflowError("trace spans too long a time to nest")

    def key(thread: np.ndarray, ts: np.ndarray) -> np.ndarray:
        return thread * span + (ts - t0)

    # Each temporary is dropped as soon as it is used: on a 4M-op trace every
    # one of these arrays is 32 MB, and they set the parse's peak memory.
    tdur = dur_ns[tree_idx]
    kstart = key(threads[0], start_ns[tree_idx])
    threads[0] = None
    order = np.lexsort((-tdur, kstart))
    ks = kstart[order]
    del kstart
    tdur_sorted = tdur[order]
    del tdur
    op_of_sorted = tree_idx[order]
    del order, tree_idx
    ends_sorted = np.sort(ks + tdur_sorted)
    del tdur_sorted  # read again from dur_ns below, for the ops that have a parent
    d_sorted = np.arange(len(ks)) - np.searchsorted(ends_sorted, ks, side="right")
    parent_sorted = _parents_sorted(d_sorted)
    depth[op_of_sorted] = d_sorted
    has_parent = parent_sorted >= 0
    child = op_of_sorted[has_parent]
    parent[child] = op_of_sorted[parent_sorted[has_parent]]
    del parent_sorted, has_parent
    np.add.at(child_ns, parent[child], dur_ns[child])
    del child

    def place(thread: np.ndarray, ts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(innermost op open at ts, number of ops open) for points."""
        k = key(thread, ts)
        if not len(ks):  # no op with a duration on any thread: nothing to be inside
            return np.full(len(k), -1, dtype=np.int64), np.zeros(len(k), dtype=np.int64)
        before = np.searchsorted(ks, k, side="right")
        open_count = before - np.searchsorted(ends_sorted, k, side="right")
        pos = _last_at_depth(d_sorted, open_count - 1, before)
        return np.where(pos >= 0, op_of_sorted[np.maximum(pos, 0)], -1), open_count

    if len(point_idx):
        owner, open_count = place(threads[1], start_ns[point_idx])
        parent[point_idx] = owner
        depth[point_idx] = open_count
    for g, leaf in enumerate(leaves):
        if not len(leaf[2]):
            continue
        owner, _ = place(threads[g + 2], leaf[2])
        owners[g] = owner
        if leaf[4]:
            sel = owner >= 0
            np.add.at(child_ns, owner[sel], leaf[3][sel])
    self_ns = dur_ns - child_ns
    return Nesting(parent, depth, self_ns, owners)


def assign_steps(ts_ns: np.ndarray, step_start: np.ndarray, step_end: np.ndarray,
                 step_number: np.ndarray, missing: int) -> np.ndarray:
    """Step number of each time point (``missing`` outside every step).

    Steps must be sorted by start and not overlap.
    """
    if len(step_start) == 0 or len(ts_ns) == 0:
        return np.full(len(ts_ns), missing, dtype=np.int64)
    idx = np.searchsorted(step_start, ts_ns, side="right") - 1
    ok = idx >= 0
    safe = np.where(ok, idx, 0)
    ok &= ts_ns < step_end[safe]
    return np.where(ok, step_number[safe], missing).astype(np.int64)


def fold_duplicates(name: np.ndarray, parent: np.ndarray, depth: np.ndarray,
                    self_ns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """torch's key_averages() rule for nested calls of the same op.

    An op whose parent has the same name and no other child op is folded into
    the parent (``aten::div_`` calling ``aten::div_``): it is not counted, and
    its self time is added to the parent's. Returns (folded, folded_self_ns).
    """
    n = len(name)
    has_parent = parent >= 0
    safe_parent = np.where(has_parent, parent, 0)
    children = np.bincount(parent[has_parent], minlength=n) if n else np.zeros(0, np.int64)
    folded = has_parent & (name == name[safe_parent]) & (children[safe_parent] == 1)
    folded_self = self_ns.copy()
    if folded.any():
        # Deepest first, so a chain a > a > a folds all the way up.
        for d in sorted(set(depth[folded].tolist()), reverse=True):
            idx = np.flatnonzero(folded & (depth == d))
            np.add.at(folded_self, parent[idx], folded_self[idx])
    return folded, folded_self
