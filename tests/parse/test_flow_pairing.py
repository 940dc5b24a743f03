"""Flows pair a start with the end of the same (category, id) in one numpy pass when every id has one of
each (Kineto's case), and event by event otherwise; both give the same pairs in the same order."""

from __future__ import annotations

import numpy as np
import pytest

from mlprof.parse.build import _paired_flows, _paired_flows_in_order
from mlprof.parse.kineto_events import FLOW_END, FLOW_START

FLOW_STEP = 1


def _flows(rng, n_ids: int, messy: bool) -> dict[str, np.ndarray]:
    ph, cat, fid = [], [], []
    for i in range(n_ids):
        kinds = [FLOW_START, FLOW_END]
        if messy:
            kinds = list(rng.choice([FLOW_START, FLOW_END, FLOW_STEP], int(rng.integers(1, 5))))
        category = int(rng.integers(0, 2))
        for kind in kinds:
            ph.append(kind)
            cat.append(category if not messy else int(rng.integers(0, 2)))
            fid.append(i if not messy else int(rng.integers(0, n_ids)))
    order = rng.permutation(len(ph))  # an end may come before its start
    return {"ph": np.array(ph, np.int8)[order], "category": np.array(cat, np.int32)[order],
            "flow_id": np.array(fid, np.int64)[order]}


@pytest.mark.parametrize("seed", range(40))
def test_fast_pairing_is_the_event_by_event_one(seed):
    rng = np.random.default_rng(seed)
    messy = seed % 2 == 1
    fl = _flows(rng, int(rng.integers(0, 60)), messy)
    expected = _paired_flows_in_order(fl)
    fast = _paired_flows(fl["ph"], fl["category"], fl["flow_id"])
    if fast is None:
        assert messy  # Kineto-like flows always take the fast path
        return
    assert fast[0].tolist() == expected[0].tolist() and fast[1].tolist() == expected[1].tolist()


def test_an_id_used_twice_goes_event_by_event():
    ph = np.array([FLOW_START, FLOW_END, FLOW_START, FLOW_END], np.int8)
    fl = {"ph": ph, "category": np.zeros(4, np.int32), "flow_id": np.zeros(4, np.int64)}
    assert _paired_flows(ph, fl["category"], fl["flow_id"]) is None
    assert [a.tolist() for a in _paired_flows_in_order(fl)] == [[0, 2], [1, 3]]
