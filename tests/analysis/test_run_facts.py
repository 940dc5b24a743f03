"""The batch shape compare reports: the first op with shapes in forward time, found a few forward spans
at a time, equals the one query over every op that it replaced."""

from __future__ import annotations

import numpy as np
import pytest

from mlprof.analysis.run_facts import _batch_shape
from mlprof.tables.store import TableStore, write_tables

# The query over every op, as it was: the reference.
_ALL_AT_ONCE = """
    SELECT h.name, h.input_dims FROM host_ops h
    ASOF JOIN (SELECT window_index, tid, start_ns, end_ns FROM phase_spans
               WHERE view = 'host' AND phase = 'forward') p
      ON h.window_index = p.window_index AND h.tid = p.tid AND h.start_ns >= p.start_ns
    WHERE h.start_ns < p.end_ns AND h.input_dims IS NOT NULL AND h.input_dims NOT IN ('[]', '[[]]')
    ORDER BY h.window_index, h.start_ns, h.depth, h.op_id LIMIT 1"""


def _run(tmp_path, seed: int, shaped_share: float):
    rng = np.random.default_rng(seed)
    spans, ops = [], []
    for window in range(int(rng.integers(1, 4))):
        t = int(rng.integers(0, 10_000)) + window * 10**9
        for _ in range(int(rng.integers(1, 400))):
            phase = str(rng.choice(["forward", "backward", "python", "forward"]))
            length = int(rng.integers(1, 50))
            spans.append((window, phase, t, t + length))
            for _ in range(int(rng.integers(0, 4))):  # ops in and around the span, some at the same start
                start = t + int(rng.integers(-3, length + 3))
                shaped = rng.random() < shaped_share
                ops.append((window, start, int(rng.integers(0, 3)), str(rng.choice(["aten::mm", "aten::add"])),
                            f"[[{int(rng.integers(1, 9))}, 4]]" if shaped else str(rng.choice(["[]", "[[]]", ""]))))
            t += length
    host = {"window_index": np.array([o[0] for o in ops], dtype=np.int64),
            "op_id": np.arange(len(ops), dtype=np.int64),
            "tid": np.full(len(ops), 7, dtype=np.int64),
            "start_ns": np.array([o[1] for o in ops], dtype=np.int64),
            "dur_ns": np.ones(len(ops), dtype=np.int64),
            "depth": np.array([o[2] for o in ops], dtype=np.int64),
            "name": np.array([o[3] for o in ops], dtype=object),
            "input_dims": np.array([o[4] or None for o in ops], dtype=object)}
    phase_spans = {"window_index": np.array([s[0] for s in spans], dtype=np.int64),
                   "view": np.full(len(spans), "host", dtype=object),
                   "phase": np.array([s[1] for s in spans], dtype=object),
                   "tid": np.full(len(spans), 7, dtype=np.int64),
                   "start_ns": np.array([s[2] for s in spans], dtype=np.int64),
                   "end_ns": np.array([s[3] for s in spans], dtype=np.int64)}
    out = tmp_path / f"run{seed}"
    write_tables(out, {"host_ops": host, "phase_spans": phase_spans}, [])
    return TableStore(out)


@pytest.mark.parametrize("seed", range(24))
def test_the_first_shaped_op_in_forward_time_is_the_one_the_whole_query_finds(tmp_path, seed):
    # From shapes on nearly every op to shapes on one op in a thousand (found late, after many spans).
    share = [0.9, 0.05, 0.002][seed % 3]
    with _run(tmp_path, seed, share) as store:
        expected = store.rows(_ALL_AT_ONCE)
        assert _batch_shape(store) == (f"{expected[0][0]} {expected[0][1]}" if expected else None)


def _layout(tmp_path, name: str, shaped_at: tuple[int, int, int]):
    """Two windows of 400 forward spans (10 ns, a 5 ns Python span after each), an unshaped op at every
    forward span's start, a shaped one in a Python span early on (not forward time: never the answer),
    and one shaped op at (window, forward span, offset in it)."""
    spans, ops = [], []
    for window in range(2):
        t = window * 10**6
        for k in range(400):
            spans += [(window, "forward", t, t + 10), (window, "python", t + 10, t + 15)]
            ops.append((window, t, "aten::add", "[]"))
            if (window, k) == shaped_at[:2]:
                ops.append((window, t + shaped_at[2], "aten::mm", f"[[{k}, {window}]]"))
            if k == 2:
                ops.append((window, t + 12, "aten::zeros", "[[1]]"))
            t += 15
    host = {"window_index": np.array([o[0] for o in ops], dtype=np.int64),
            "op_id": np.arange(len(ops), dtype=np.int64), "tid": np.full(len(ops), 7, dtype=np.int64),
            "start_ns": np.array([o[1] for o in ops], dtype=np.int64), "dur_ns": np.ones(len(ops), dtype=np.int64),
            "depth": np.zeros(len(ops), dtype=np.int64), "name": np.array([o[2] for o in ops], dtype=object),
            "input_dims": np.array([o[3] for o in ops], dtype=object)}
    phase_spans = {"window_index": np.array([s[0] for s in spans], dtype=np.int64),
                   "view": np.full(len(spans), "host", dtype=object),
                   "phase": np.array([s[1] for s in spans], dtype=object), "tid": np.full(len(spans), 7, dtype=np.int64),
                   "start_ns": np.array([s[2] for s in spans], dtype=np.int64),
                   "end_ns": np.array([s[3] for s in spans], dtype=np.int64)}
    write_tables(tmp_path / name, {"host_ops": host, "phase_spans": phase_spans}, [])
    return TableStore(tmp_path / name)


# Spans searched 16, then 64, then 256 at a time: the first and last of each group, and the next window.
@pytest.mark.parametrize("window,span", [(0, 0), (0, 15), (0, 16), (0, 79), (0, 80), (0, 335), (0, 336), (0, 399),
                                          (1, 0), (1, 17), (1, 399)])
@pytest.mark.parametrize("offset", [0, 9])
def test_the_shaped_op_is_found_wherever_it_lies(tmp_path, window, span, offset):
    with _layout(tmp_path, "run", (window, span, offset)) as store:
        assert store.rows(_ALL_AT_ONCE) == [("aten::mm", f"[[{span}, {window}]]")]
        assert _batch_shape(store) == f"aten::mm [[{span}, {window}]]"


def test_a_run_without_shapes_has_no_batch_shape(tmp_path):
    with _run(tmp_path, 5, 0.0) as store:
        assert _batch_shape(store) is None
