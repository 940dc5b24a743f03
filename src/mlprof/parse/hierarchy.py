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
    pid = np.concatenate(pids)
    tid = np.concatenate(tids)
    _, pid_code = np.unique(pid, return_inverse=True)
    tid_values, tid_code = np.unique(tid, return_inverse=True)
    codes = pid_code.reshape(-1).astype(np.int64) * len(tid_values) + tid_code.reshape(-1)
    out, at = [], 0
    for p in pids:
        out.append(codes[at:at + len(p)])
        at += len(p)
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
    """
    n_ops = len(start_ns)
    parent = np.full(n_ops, -1, dtype=np.int64)
    depth = np.full(n_ops, -1, dtype=np.int32)
    child_ns = np.zeros(n_ops, dtype=np.int64)
    owners = [np.full(len(leaf[2]), -1, dtype=np.int64) for leaf in leaves]
    tree_idx = np.flatnonzero(in_tree)
    groups_pid = [pid[tree_idx]] + [leaf[0] for leaf in leaves]
    groups_tid = [tid[tree_idx]] + [leaf[1] for leaf in leaves]
    total = sum(len(g) for g in groups_pid)
    if total == 0:
        return Nesting(parent, depth, dur_ns.copy(), owners)
    thread = np.concatenate(_thread_codes(groups_pid, groups_tid))
    start = np.concatenate([start_ns[tree_idx]] + [leaf[2] for leaf in leaves])
    dur = np.concatenate([dur_ns[tree_idx]] + [leaf[3] for leaf in leaves])
    # Group id: 0 = host op, g+1 = leaf group g; local index inside the group.
    group = np.concatenate([np.zeros(len(tree_idx), np.int64)]
                           + [np.full(len(leaf[2]), g + 1, np.int64) for g, leaf in enumerate(leaves)])
    local = np.concatenate([tree_idx] + [np.arange(len(leaf[2])) for leaf in leaves])
    # Per thread, by start; an enclosing op (longer) before what it encloses.
    order = np.lexsort((-dur, start, thread))
    counts_as_child = [False] + [leaf[4] for leaf in leaves]
    t_l, s_l, d_l, g_l, i_l = (a[order].tolist() for a in (thread, start, dur, group, local))
    parent_l = parent.tolist()
    depth_l = depth.tolist()
    child_l = child_ns.tolist()
    owner_l = [o.tolist() for o in owners]
    stack_op: list[int] = []
    stack_end: list[int] = []
    current = -1
    for th, s, d, g, i in zip(t_l, s_l, d_l, g_l, i_l):
        if th != current:
            current = th
            stack_op.clear()
            stack_end.clear()
        while stack_end and stack_end[-1] <= s:
            stack_op.pop()
            stack_end.pop()
        top = stack_op[-1] if stack_op else -1
        if g == 0:
            parent_l[i] = top
            depth_l[i] = len(stack_op)
            if top >= 0:
                child_l[top] += d
            stack_op.append(i)
            stack_end.append(s + d)
        else:
            owner_l[g - 1][i] = top
            if top >= 0 and counts_as_child[g]:
                child_l[top] += d
    parent = np.asarray(parent_l, dtype=np.int64)
    depth = np.asarray(depth_l, dtype=np.int32)
    self_ns = dur_ns - np.asarray(child_l, dtype=np.int64)
    return Nesting(parent, depth, self_ns, [np.asarray(o, dtype=np.int64) for o in owner_l])


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
