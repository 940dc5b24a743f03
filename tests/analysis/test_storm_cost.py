"""op_storm's cost: storm-op time plus the Python time of the short gaps between storm ops, where a
gap's time inside top-level ops (summed over them) is not Python's. The query reads that time from
running counts and sums; here it must equal the overlaps summed op by op, on random threads whose
top-level ops overlap (a cpu_op inside a user annotation inside another cpu_op is top-level too)."""

from __future__ import annotations

import random

import numpy as np
import pytest

from mlprof.analysis.advisor.context import AdvisorContext
from mlprof.analysis.advisor.model import Thresholds
from mlprof.analysis.advisor.rules_storm import _storm_cost
from mlprof.tables.store import MISSING_INT, TableStore, write_tables


def _random_run(rng: random.Random) -> tuple[list[tuple], list[tuple]]:
    """(host ops: op_id, parent, category, window, step, tid, start, dur), (storm ops: window, step, tid, start, end)."""
    ops, storm = [], []
    starts = rng.sample(range(0, 4_000_000, 7), 600)  # distinct: the gaps' order is the starts'
    for op_id, start in enumerate(sorted(starts)):
        parent = rng.choice([None, None, op_id - 1]) if op_id else None
        category = rng.choice(["cpu_op", "cpu_op", "user_annotation"])
        ops.append((op_id, parent, category, 0, start // 1_000_000, rng.choice([1, 2]), start,
                    rng.choice([0, 5, 900, 20_000, 150_000])))
    for start in rng.sample(range(0, 4_000_000, 11), 300):
        storm.append((0, start // 1_000_000, rng.choice([1, 2]), start, start + rng.choice([1, 50, 3_000])))
    return ops, storm


def _expected(ops: list[tuple], storm: list[tuple], gap_ns: int) -> tuple[dict[tuple, int], int, int]:
    """Cost per (window, step, tid); gaps partly covered; pairs of top-level ops that overlap."""
    category = {op[0]: op[2] for op in ops}
    top = [(tid, start, start + dur) for op_id, parent, cat, _, step, tid, start, dur in ops
           if cat == "cpu_op" and (parent is None or category[parent] != "cpu_op")]
    overlapping = sum(1 for i, a in enumerate(top) for b in top[i + 1:] if a[0] == b[0] and a[1] < b[2] and b[1] < a[2])
    partly = 0
    cost = {}
    for key in sorted({s[:3] for s in storm}):
        mine = sorted((s[3], s[4]) for s in storm if s[:3] == key)
        python = 0
        for (_, prev_end), (start, _) in zip(mine, mine[1:]):
            if start > prev_end and start - prev_end < gap_ns:
                covered = sum(max(0, min(end, start) - max(begin, prev_end)) for tid, begin, end in top
                              if tid == key[2])
                python += start - prev_end - covered
                partly += 0 < covered < start - prev_end
        cost[key] = sum(end - start for start, end in mine) + max(python, 0)
    return cost, partly, overlapping


@pytest.mark.parametrize("seed", range(8))
def test_storm_cost_equals_the_overlaps_summed_op_by_op(tmp_path, seed):
    rng = random.Random(seed)
    ops, storm = _random_run(rng)
    cols = list(zip(*ops))
    host = {"op_id": np.array(cols[0]), "parent_op_id": np.array([MISSING_INT if p is None else p for p in cols[1]]),
            "category": np.array(cols[2], dtype=object), "window_index": np.array(cols[3]),
            "step": np.array(cols[4]), "tid": np.array(cols[5]), "start_ns": np.array(cols[6]),
            "dur_ns": np.array(cols[7]), "name": np.array(["aten::view"] * len(ops), dtype=object)}
    write_tables(tmp_path, {"host_ops": host}, [])
    th = Thresholds()
    with TableStore(tmp_path) as store:
        store.temp_table("_storm_ops", "window_index INTEGER, step BIGINT, tid BIGINT, start_ns BIGINT, end_ns BIGINT",
                         storm)
        total, rows = _storm_cost(AdvisorContext(store), th)
    got = {(r["window_index"], r["step"], r["tid"]): int(r["cost_ns"]) for r in rows}
    expected, partly, overlapping = _expected(ops, storm, th.op_storm_gap_ns)
    assert got == expected
    assert total == sum(expected.values())
    assert partly >= 5 and overlapping >= 5  # the cases are there
