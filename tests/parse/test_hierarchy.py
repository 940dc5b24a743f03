"""The vectorised host-op nesting against a plain stack sweep, on random trees over several threads."""

from __future__ import annotations

import numpy as np
import pytest

from mlprof.parse.hierarchy import nest_host_events


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


@pytest.mark.parametrize("seed", range(8))
def test_nesting_matches_a_stack_sweep(seed):
    rng = np.random.default_rng(seed)
    rows = []
    # Threads with large, unsorted ids, two processes: thread codes must not mix them.
    for pid, tid in [(7, 2**40 + 3), (7, 11), (123456, 11), (123456, 2**33)]:
        spans: list = []
        for root in range(int(rng.integers(1, 5))):
            lo = root * 10_000
            spans.append((lo, 5_000))
            _random_tree(rng, lo, lo + 5_000, 1, spans)
        rows += [(pid, tid, s, d) for s, d in spans]
    order = rng.permutation(len(rows))  # file order is not time order
    pid, tid, start, dur = (np.array([rows[i][k] for i in order], dtype=np.int64) for k in range(4))
    nest = nest_host_events(pid, tid, start, dur, np.ones(len(start), bool), [])
    parent, depth, self_ns = _reference(pid, tid, start, dur)
    assert len(start) > 20
    np.testing.assert_array_equal(nest.parent, parent)
    np.testing.assert_array_equal(nest.depth, depth)
    np.testing.assert_array_equal(nest.self_ns, self_ns)
