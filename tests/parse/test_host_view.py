"""The host view over a run of steps at once is, step by step, the host view of each step alone.

Attributing one step is pinned by the golden tests (test_attribution.py);
these tests pin that doing many steps in one pass changes nothing: spans that
cross steps, gaps between steps, other threads' work that began before a
step, collector pauses, ties, badly nested spans and optimizer closures.
"""

from __future__ import annotations

import numpy as np
import pytest

from mlprof.parse import host_view
from mlprof.parse.host_view import NEUTRAL, PHASE_CODE, disjoint_runs, host_segments, sorted_unique

BWD, OPT, FWD, COMM = (PHASE_CODE[p] for p in ("backward", "optimizer", "forward", "communication"))


def _spans(rng, n: int, t_max: int, phases: list[int]) -> dict[str, np.ndarray]:
    start = rng.integers(0, t_max, n)
    # Mostly short spans, a few long ones that cross steps; some empty.
    dur = np.where(rng.random(n) < 0.1, rng.integers(0, t_max // 3, n), rng.integers(0, 40, n))
    return {"start_ns": start.astype(np.int64), "end_ns": (start + dur).astype(np.int64),
            "phase": rng.choice(phases, n).astype(np.int64)}


def _steps(rng, k: int) -> tuple[np.ndarray, np.ndarray]:
    lengths = rng.integers(1, 120, k)
    gaps = np.where(rng.random(k) < 0.5, 0, rng.integers(1, 30, k))
    lo = np.cumsum(gaps + np.r_[0, lengths[:-1]])
    return lo.astype(np.int64), (lo + lengths).astype(np.int64)


def _rows(part, lo, hi):
    return [(int(lo[k]), int(hi[k]), int(s), int(e), int(label))
            for k, s, e, label in zip(part.step, part.start, part.end, part.label)]


def _one_at_a_time(lo, hi, spans, other, gc):
    rows = []
    for k in range(len(lo)):
        part = host_segments(lo[k:k + 1], hi[k:k + 1], spans, other, gc)
        rows += _rows(part, lo[k:k + 1], hi[k:k + 1])
    return rows


@pytest.mark.parametrize("seed", range(60))
def test_a_run_of_steps_is_each_step_alone(seed):
    rng = np.random.default_rng(seed)
    lo, hi = _steps(rng, int(rng.integers(1, 12)))
    t_max = int(hi[-1]) + 20
    spans = _spans(rng, int(rng.integers(0, 80)), t_max, [NEUTRAL, NEUTRAL, FWD, BWD, OPT, PHASE_CODE["data_loading"]])
    other = _spans(rng, int(rng.integers(0, 10)), t_max, [BWD, COMM])
    gc = _spans(rng, int(rng.integers(0, 4)), t_max, [0])
    together = host_segments(lo, hi, spans, other, gc)
    assert _rows(together, lo, hi) == _one_at_a_time(lo, hi, spans, other, gc)
    # Each step's segments cover it exactly, in order.
    for k in range(len(lo)):
        mine = together.step == k
        assert together.start[mine][0] == lo[k] and together.end[mine][-1] == hi[k]
        assert (together.start[mine][1:] == together.end[mine][:-1]).all()


def test_engine_gaps_do_not_reach_across_a_step_boundary():
    # Step 1 ends in a gap after a backward node, step 2 starts with a gap before one:
    # neither gap lies between two backward nodes of its own step, so both stay Python.
    lo, hi = np.array([0, 100]), np.array([100, 200])
    spans = {"start_ns": np.array([10, 150]), "end_ns": np.array([90, 190]), "phase": np.array([BWD, BWD])}
    empty = {"start_ns": np.zeros(0, np.int64), "end_ns": np.zeros(0, np.int64), "phase": np.zeros(0, np.int64)}
    part = host_segments(lo, hi, spans, empty, empty)
    python = PHASE_CODE["python"]
    assert _rows(part, lo, hi) == [(0, 100, 0, 10, python), (0, 100, 10, 90, BWD), (0, 100, 90, 100, python),
                                   (100, 200, 100, 150, python), (100, 200, 150, 190, BWD),
                                   (100, 200, 190, 200, python)]


def test_a_span_across_two_steps_counts_in_each():
    lo, hi = np.array([0, 100]), np.array([100, 200])
    spans = {"start_ns": np.array([50]), "end_ns": np.array([150]), "phase": np.array([PHASE_CODE["data_loading"]])}
    empty = {"start_ns": np.zeros(0, np.int64), "end_ns": np.zeros(0, np.int64), "phase": np.zeros(0, np.int64)}
    part = host_segments(lo, hi, spans, empty, empty)
    load, python = PHASE_CODE["data_loading"], PHASE_CODE["python"]
    assert _rows(part, lo, hi) == [(0, 100, 0, 50, python), (0, 100, 50, 100, load),
                                   (100, 200, 100, 150, load), (100, 200, 150, 200, python)]


def test_overlapping_steps_are_split_into_runs_of_disjoint_ones():
    lo = np.array([0, 10, 50, 60, 200])
    hi = np.array([40, 30, 55, 100, 300])
    # [0,40) holds [10,30): a new run at 10; [50,55) then [60,100) are disjoint again, so is [200,300).
    assert disjoint_runs(lo, hi) == [(0, 1), (1, 5)]
    assert disjoint_runs(np.array([0, 5]), np.array([10, 20])) == [(0, 1), (1, 2)]
    assert disjoint_runs(np.zeros(0, np.int64), np.zeros(0, np.int64)) == []


# -- the sweep in numpy (nested spans) against the sweep with a stack ------------------------------------------
def _nested(rng, n: int, t_max: int, phases: list[int]) -> dict[str, np.ndarray]:
    """A random forest of up to ``n`` spans: children inside their parent, some sharing its bounds,
    some touching their neighbour, a few empty."""
    out: list[tuple[int, int]] = []

    def fill(a: int, b: int, level: int) -> None:
        t = a
        while t < b - 1 and len(out) < n and level < 7:
            t += int(rng.integers(0, 4)) if rng.random() < 0.4 else 0
            if t >= b - 1:
                return
            end = min(b, t + int(rng.integers(1, max(2, b - t))))
            out.append((t, end))
            if rng.random() < 0.15:
                out.append((t, end))  # the same bounds twice: the first one given is the outer one
            if rng.random() < 0.05:
                out.append((t, t))
            fill(t, end, level + 1)
            t = end

    fill(0, t_max, 0)
    bounds = np.array(out or [(0, 0)], dtype=np.int64).reshape(-1, 2)
    order = rng.permutation(len(bounds))  # the order given only breaks ties of identical bounds
    return {"start_ns": bounds[order, 0], "end_ns": bounds[order, 1],
            "phase": rng.choice(phases, len(bounds)).astype(np.int64)}


def _sweep_inputs(lo, hi, spans):
    k, idx = host_view._per_step(lo, hi, spans["start_ns"], spans["end_ns"])
    s, e = spans["start_ns"][idx], spans["end_ns"][idx]
    order = np.lexsort((idx, -e, s, k))
    k, s, e, idx = k[order], s[order], e[order], idx[order]
    return k, np.maximum(s, lo[k]), np.minimum(e, hi[k]), spans["phase"][idx]


def _same_sweep(lo, hi, spans) -> bool:
    """Whether the numpy sweep took the spans (else None); when it did, it must equal the stack sweep."""
    inputs = _sweep_inputs(lo, hi, spans)
    fast = host_view._nested_sweep(lo, hi, *inputs)
    if fast is None:
        return False
    slow = host_view._stack_sweep(lo, hi, *inputs)
    assert _rows(fast[0], lo, hi) == _rows(slow[0], lo, hi)
    assert fast[1].tolist() == slow[1].tolist()
    return True


@pytest.mark.parametrize("seed", range(80))
def test_the_numpy_sweep_is_the_stack_sweep_on_nested_spans(seed):
    rng = np.random.default_rng(1000 + seed)
    lo, hi = _steps(rng, int(rng.integers(1, 8)))
    phases = [NEUTRAL, NEUTRAL, NEUTRAL, FWD, BWD, BWD, OPT, PHASE_CODE["data_loading"]]
    spans = _nested(rng, int(rng.integers(1, 150)), int(hi[-1]) + 20, phases)
    took = _same_sweep(lo, hi, spans)
    # A forest cut to disjoint steps still nests, unless a span that crosses a step's start
    # is cut to it and meets a longer one cut the same way.
    crosses = ((spans["start_ns"][:, None] < lo) & (spans["end_ns"][:, None] > lo)).any()
    assert took or crosses


def _nests(lo, hi, spans) -> bool:
    """Whether the spans, cut to their steps, nest: none starts inside another and ends after it."""
    k, s, e, _ = _sweep_inputs(lo, hi, spans)
    open_ends: list[tuple[int, int]] = []  # (step, end) of the spans enclosing the current one
    for step, a, b in zip(k.tolist(), s.tolist(), e.tolist()):
        while open_ends and (open_ends[-1][0] != step or open_ends[-1][1] <= a):
            open_ends.pop()
        if open_ends and b > open_ends[-1][1]:
            return False
        open_ends.append((step, b))
    return True


@pytest.mark.parametrize("seed", range(40))
def test_spans_that_do_not_nest_go_to_the_stack_sweep(seed):
    rng = np.random.default_rng(2000 + seed)
    lo, hi = _steps(rng, int(rng.integers(1, 8)))
    spans = _spans(rng, int(rng.integers(2, 80)), int(hi[-1]) + 20, [NEUTRAL, FWD, BWD, OPT])
    # The numpy sweep refuses spans that cross (they go to the stack sweep) and, when it takes them,
    # equals the stack sweep (_same_sweep asserts that).
    took = _same_sweep(lo, hi, spans)
    assert not took or _nests(lo, hi, spans)


def test_an_optimizer_closure_is_forward_up_to_its_backward_in_the_numpy_sweep():
    lo, hi = np.array([0]), np.array([100])
    # Optimizer.step [10, 90) runs the closure: forward ops, then backward from 50.
    spans = {"start_ns": np.array([10, 20, 50, 60]), "end_ns": np.array([90, 30, 70, 65]),
             "phase": np.array([OPT, NEUTRAL, BWD, NEUTRAL])}
    inputs = _sweep_inputs(lo, hi, spans)
    part, first_bwd = host_view._nested_sweep(lo, hi, *inputs)
    assert _rows(part, lo, hi) == [(0, 100, 0, 10, -1), (0, 100, 10, 20, FWD), (0, 100, 20, 30, FWD),
                                   (0, 100, 30, 50, FWD), (0, 100, 50, 60, BWD), (0, 100, 60, 65, BWD),
                                   (0, 100, 65, 70, BWD), (0, 100, 70, 90, OPT), (0, 100, 90, 100, -1)]
    assert first_bwd.tolist() == [50]
    assert _same_sweep(lo, hi, spans)


def test_sorted_unique_is_numpys_unique():
    rng = np.random.default_rng(7)
    for n in (0, 1, 2, 1000):
        values = rng.integers(-5, 50, n)
        assert sorted_unique(values).tolist() == np.unique(values).tolist()
