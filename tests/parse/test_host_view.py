"""The host view over a run of steps at once is, step by step, the host view of each step alone.

Attributing one step is pinned by the golden tests (test_attribution.py);
these tests pin that doing many steps in one pass changes nothing: spans that
cross steps, gaps between steps, other threads' work that began before a
step, collector pauses, ties, badly nested spans and optimizer closures.
"""

from __future__ import annotations

import numpy as np
import pytest

from mlprof.parse.host_view import NEUTRAL, PHASE_CODE, disjoint_runs, host_segments

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
