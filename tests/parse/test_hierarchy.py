"""The vectorised host-op nesting against a plain stack sweep, on random trees over several threads.

The nesting runs over the sorted ops in slices; small slice sizes put slice
boundaries everywhere (inside runs of equal starts, deep in a tree).
"""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from mlprof.parse import hierarchy
from mlprof.parse.hierarchy import assign_steps, fold_duplicates, nest_host_events

SLICE_SIZES = [1, 3, 50, hierarchy._SLICE]


def _random_tree(rng, start: int, end: int, depth: int, out: list) -> None:
    """Properly nested children inside [start, end), some sharing their parent's start."""
    t = start if rng.random() < 0.3 else start + int(rng.integers(0, 3))
    while depth < 6 and t < end - 2 and rng.random() < 0.8:
        dur = int(rng.integers(1, max(2, (end - t) // 2)))
        out.append((t, dur))
        _random_tree(rng, t, t + dur, depth + 1, out)
        t += dur + int(rng.integers(0, 3))


def _reference(pid, tid, start, dur):
    """Parent, depth and self time by a stack per thread (sorted by start, longer first)."""
    n = len(start)
    parent, depth, child = np.full(n, -1), np.full(n, -1), np.zeros(n, dtype=np.int64)
    for thread in set(zip(pid.tolist(), tid.tolist())):
        idx = [i for i in range(n) if (pid[i], tid[i]) == thread]
        idx.sort(key=lambda i: (start[i], -dur[i]))
        stack: list[int] = []
        for i in idx:
            while stack and start[stack[-1]] + dur[stack[-1]] <= start[i]:
                stack.pop()
            if stack:
                parent[i] = stack[-1]
                child[stack[-1]] += dur[i]
            depth[i] = len(stack)
            stack.append(i)
    return parent, depth, dur - child


def _random_forest(rng, threads) -> tuple[np.ndarray, ...]:
    """(pid, tid, start, dur) of random trees on each thread, in shuffled order."""
    rows = []
    for pid, tid in threads:
        spans: list = []
        for root in range(int(rng.integers(1, 5))):
            lo = root * 10_000
            spans.append((lo, 5_000))
            _random_tree(rng, lo, lo + 5_000, 1, spans)
        rows += [(pid, tid, s, d) for s, d in spans]
    order = rng.permutation(len(rows))  # file order is not time order
    return tuple(np.array([rows[i][k] for i in order], dtype=np.int64) for k in range(4))


# Threads with large, unsorted ids, two processes: thread codes must not mix them.
THREADS = [(7, 2**40 + 3), (7, 11), (123456, 11), (123456, 2**33)]


@pytest.mark.parametrize("slice_size", SLICE_SIZES)
@pytest.mark.parametrize("seed", range(8))
def test_nesting_matches_a_stack_sweep(seed, slice_size, monkeypatch):
    monkeypatch.setattr(hierarchy, "_SLICE", slice_size)
    pid, tid, start, dur = _random_forest(np.random.default_rng(seed), THREADS)
    nest = nest_host_events(pid, tid, start, dur, np.ones(len(start), bool), [])
    parent, depth, self_ns = _reference(pid, tid, start, dur)
    assert len(start) > 20
    np.testing.assert_array_equal(nest.parent, parent)
    np.testing.assert_array_equal(nest.depth, depth)
    np.testing.assert_array_equal(nest.self_ns, self_ns)


def _innermost_open(pid, tid, start, dur, tree, p, t, ts):
    """(innermost tree op open at ts on thread (p, t), number open), by looking at every op."""
    open_ops = [i for i in np.flatnonzero(tree)
                if pid[i] == p and tid[i] == t and start[i] <= ts < start[i] + dur[i]]
    open_ops.sort(key=lambda i: (start[i], -dur[i], i))
    return (open_ops[-1] if open_ops else -1), len(open_ops)


@pytest.mark.parametrize("slice_size", SLICE_SIZES)
@pytest.mark.parametrize("seed", range(4))
def test_points_and_leaves_go_to_the_innermost_open_op(seed, slice_size, monkeypatch):
    """Zero-length ops and leaves (runtime calls, allocations) get the innermost op open at their time,
    also at an op's first and last instant, before every op, after every op and on threads without ops;
    leaves counted as children take their time from the op's self time; ops outside the tree stay out."""
    monkeypatch.setattr(hierarchy, "_SLICE", slice_size)
    rng = np.random.default_rng(100 + seed)
    pid, tid, start, dur = _random_forest(rng, THREADS[:3])
    n = len(start)
    outside = rng.random(n) < 0.1  # like python_function events
    zero = ~outside & (rng.random(n) < 0.1)
    dur[zero] = 0
    tree = ~outside & ~zero
    edges = np.concatenate([start, start + dur - 1, start + dur, [-5, 10**6]])

    def leaf_group(m: int) -> tuple[np.ndarray, ...]:
        threads = THREADS[:3] + [(99, 1)]
        pick = rng.integers(0, len(threads), m)
        ts = np.where(rng.random(m) < 0.5, rng.choice(edges, m), rng.integers(-10, 50_000, m))
        return (np.array([threads[i][0] for i in pick], dtype=np.int64),
                np.array([threads[i][1] for i in pick], dtype=np.int64), ts.astype(np.int64),
                rng.integers(0, 5, m).astype(np.int64))

    runtime, memory = leaf_group(200), leaf_group(100)
    nest = nest_host_events(pid, tid, start, dur, ~outside,
                            [(*runtime, True), (*memory, False), (*leaf_group(0), True)])

    parent, depth, self_ns = _reference(pid[tree], tid[tree], start[tree], dur[tree])
    tree_idx = np.flatnonzero(tree)
    want_parent = np.full(n, -1)
    want_parent[tree] = np.where(parent >= 0, tree_idx[np.maximum(parent, 0)], -1)
    want_depth = np.full(n, -1)
    want_depth[tree] = depth
    want_self = dur.copy()
    want_self[tree] = self_ns
    for i in np.flatnonzero(zero):
        want_parent[i], want_depth[i] = _innermost_open(pid, tid, start, dur, tree, pid[i], tid[i], start[i])
    for group, counts, owners in [(runtime, True, nest.leaf_owner[0]), (memory, False, nest.leaf_owner[1])]:
        want_owner = [_innermost_open(pid, tid, start, dur, tree, p, t, ts)[0] for p, t, ts in zip(*group[:3])]
        np.testing.assert_array_equal(owners, want_owner)
        if counts:
            for owner, leaf_dur in zip(want_owner, group[3]):
                if owner >= 0:
                    want_self[owner] -= leaf_dur
    assert (np.asarray(nest.leaf_owner[0]) >= 0).any() and (np.asarray(nest.leaf_owner[0]) < 0).any()
    assert len(nest.leaf_owner[2]) == 0
    np.testing.assert_array_equal(nest.parent, want_parent)
    np.testing.assert_array_equal(nest.depth, want_depth)
    np.testing.assert_array_equal(nest.self_ns, want_self)


def test_only_leaves_and_nothing_at_all():
    empty = np.zeros(0, dtype=np.int64)
    leaf = (np.array([1, 1]), np.array([2, 3]), np.array([5, 0]), np.array([1, 1]), True)
    nest = nest_host_events(empty, empty, empty, empty, np.zeros(0, bool), [leaf])
    np.testing.assert_array_equal(nest.leaf_owner[0], [-1, -1])
    nest = nest_host_events(np.array([1]), np.array([2]), np.array([3]), np.array([4]), np.zeros(1, bool), [])
    np.testing.assert_array_equal(nest.parent, [-1])
    np.testing.assert_array_equal(nest.depth, [-1])
    np.testing.assert_array_equal(nest.self_ns, [4])


@pytest.mark.parametrize("slice_size", SLICE_SIZES)
def test_points_get_the_step_they_fall_in(slice_size, monkeypatch):
    monkeypatch.setattr(hierarchy, "_SLICE", slice_size)
    start, end, number = np.array([10, 20, 40]), np.array([20, 30, 50]), np.array([5, 6, 8])
    ts = np.array([0, 10, 19, 20, 29, 30, 35, 40, 49, 50, 99, 15])
    np.testing.assert_array_equal(assign_steps(ts, start, end, number, -1),
                                  [-1, 5, 5, 6, 6, -1, -1, 8, 8, -1, -1, 5])
    assert assign_steps(ts, start[:0], end[:0], number[:0], -1).tolist() == [-1] * len(ts)


@pytest.mark.parametrize("slice_size", SLICE_SIZES)
def test_an_op_calling_only_itself_folds_into_its_parent(slice_size, monkeypatch):
    """torch's rule: a > a > a folds all the way up; a calling a twice, or b calling a, does not fold."""
    monkeypatch.setattr(hierarchy, "_SLICE", slice_size)
    # 0: a > 1: a > 2: a;  3: a > (4: a, 5: a);  6: b > 7: a
    name = np.array([0, 0, 0, 0, 0, 0, 1, 0], dtype=np.int32)
    parent = np.array([-1, 0, 1, -1, 3, 3, -1, 6])
    depth = np.array([0, 1, 2, 0, 1, 1, 0, 1], dtype=np.int32)
    self_ns = np.array([1, 2, 4, 8, 16, 32, 64, 128])
    folded, folded_self = fold_duplicates(name, parent, depth, self_ns)
    np.testing.assert_array_equal(folded, [False, True, True, False, False, False, False, False])
    np.testing.assert_array_equal(folded_self, [7, 6, 4, 8, 16, 32, 64, 128])


def test_nesting_holds_little_beside_its_outputs(monkeypatch):
    """Traced numpy memory of one nesting (deterministic): the outputs are 22 bytes per op here
    (parent, depth, self time, leaf owners); the sweep over slices adds ~20, where one pass over
    every op at once added ~70 (sort keys, sorted copies, depth argsort)."""
    monkeypatch.setattr(hierarchy, "_SLICE", 4096)
    n = 200_000
    block = np.arange(n // 4) * 40  # an op and its three children
    start = np.stack([block, block + 1, block + 11, block + 21], axis=1).ravel()
    dur = np.tile([40, 9, 9, 9], n // 4)
    shuffle = np.random.default_rng(0).permutation(n)
    start, dur = start[shuffle], dur[shuffle]
    pid, tid = np.ones(n, dtype=np.int64), np.full(n, 7, dtype=np.int64)
    leaves = [(pid[:n // 4], tid[:n // 4], start[:n // 4] + 2, np.ones(n // 4, dtype=np.int64), True)]
    tracemalloc.start()
    try:
        nest = nest_host_events(pid, tid, start, dur, np.ones(n, bool), leaves)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert nest.depth.max() == 1
    assert peak < 50 * n


def test_distinct_values_are_np_unique_of_the_selection():
    """Few values found one minimum at a time, many by np.unique: the same answer either way."""
    from mlprof.parse.hierarchy import distinct

    rng = np.random.default_rng(3)
    for trial in range(400):
        n = int(rng.integers(0, 300))
        values = rng.integers(-int(rng.integers(1, 12)), 12, size=n).astype(np.int64) * int(rng.choice([1, 2**40]))
        where = rng.random(n) < 0.6 if trial % 2 else None
        want = np.unique(values if where is None else values[where])
        got = distinct(values, where)
        assert got.tolist() == want.tolist() and got.dtype == np.int64
    assert distinct(np.array([2**62, -2**63, 2**62], dtype=np.int64)).tolist() == [-2**63, 2**62]
