"""The cluster page's views stay small at 1,024 ranks and keep the straggler visible (analysis.cluster_views)."""

from __future__ import annotations

import json

import pytest

from mlprof.analysis.cluster import combine
from mlprof.analysis.cluster_views import (MAX_BANDS, TOP_RANKS, arrival_by_rank, cluster_views, lateness_map,
                                           matrix_view, rank_bands, step_spread)

MS = 1_000_000


def _rank(rank: int, late_ms: float = 0.0, step_ms: float = 10.0, steps: int = 4) -> dict:
    """A rank whose all-reduce of each step starts ``late_ms`` after 5 ms into the step (gloo, host ops)."""
    ops = [{"name": "gloo:all_reduce", "grp": "", "step": i, "start_ns": int((i * 20 + 5 + late_ms) * MS),
            "dur_ns": int(4 * MS), "size_bytes": 4000} for i in range(steps)]
    rows = [{"window": 0, "step": i, "dur_ns": int((step_ms + late_ms) * MS), "compute_ns": int((6 + late_ms) * MS),
             "communication_ns": 4 * MS, "communication_not_overlapped_ns": 4 * MS, "free_ns": None,
             "data_loading_ns": 0} for i in range(steps)]
    return {"rank": rank, "source": f"r{rank}", "comm_kind": "host", "steps": rows, "comm_ops": ops, "matrix": []}


@pytest.mark.parametrize("n, bands, size", [(1, 1, 1), (2, 2, 1), (64, 64, 1), (65, 33, 2), (1024, 64, 16), (1000, 63, 16)])
def test_rank_bands_are_at_most_max_bands_of_equal_size(n, bands, size):
    got = rank_bands(list(range(n)))
    assert len(got) == bands <= MAX_BANDS
    assert got[0][0] == 0 and got[-1][1] == n - 1
    assert all(b[1] - b[0] + 1 == size for b in got[:-1])
    assert got[0][2] == ("rank 0" if size == 1 else f"ranks 0-{size - 1}")


def test_at_1024_ranks_every_view_is_small_and_names_the_late_rank():
    slow = 700
    report = combine([_rank(r, late_ms=3.0 if r == slow else (r % 5) * 0.01) for r in range(1024)]).to_dict()
    views = cluster_views(report)
    assert views["ranks"] == 1024 and len(views["slowest_ranks"]) == TOP_RANKS
    assert max(views["slowest_ranks"], key=lambda r: r["step_ns"])["rank"] == slow
    # Who arrives last: the slow rank every time, 3 ms behind the first.
    first = views["arrival_by_rank"][0]
    assert (first["rank"], first["last_count"], first["instances"], first["last_share"]) == (slow, 4, 4, 1.0)
    assert first["mean_late_ns"] == pytest.approx(3 * MS, abs=0.05 * MS)
    # Lateness: 64 bands of 16 ranks x 4 steps; the band holding rank 700 is the hot row in every step.
    lat = views["lateness"]
    assert len(lat["bands"]) == 64 and lat["ranks_per_band"] == 16 and lat["steps"] == [0, 1, 2, 3]
    assert len(lat["cells"]) == 64 * 4
    hot = lat["bands"].index("ranks 688-703")
    for step in range(4):
        row = {j: v for i, j, v in lat["cells"] if i == step}
        assert max(row, key=row.get) == hot and row[hot] == pytest.approx(3 * MS, abs=0.05 * MS)
    spread = views["step_spread"]
    assert [s["slowest_rank"] for s in spread] == [slow] * 4 and all(s["ranks"] == 1024 for s in spread)
    assert spread[0]["max_ns"] == 13 * MS and spread[0]["min_ns"] == 10 * MS
    # The views of 1,024 ranks are a few hundred KB at most, not the full report's rows.
    assert len(json.dumps(views)) < 200_000


def test_arrival_by_rank_weights_lateness_by_instances():
    rows = [{"rank": 1, "source": "a", "instances": 3, "last_count": 3, "mean_late_ns": 2_000},
            {"rank": 1, "source": "a", "instances": 1, "last_count": 0, "mean_late_ns": 6_000},
            {"rank": 0, "source": "b", "instances": 4, "last_count": 1, "mean_late_ns": 0}]
    (one, zero) = arrival_by_rank(rows)
    assert (one["rank"], one["instances"], one["last_count"], one["last_share"], one["mean_late_ns"]) == (1, 4, 3, 0.75, 3_000)
    assert (zero["rank"], zero["last_share"]) == (0, 0.25)


def test_step_spread_and_lateness_leave_rows_without_a_step_out():
    rows = [{"rank": 0, "step": None, "dur_ns": 5, "late_ns": 9}, {"rank": 0, "step": 2, "dur_ns": 4, "late_ns": 0},
            {"rank": 1, "step": 2, "dur_ns": 8, "late_ns": 7}]
    assert step_spread(rows) == [{"step": 2, "ranks": 2, "min_ns": 4, "median_ns": 6, "max_ns": 8, "slowest_rank": 1}]
    assert lateness_map(rows) == {"steps": [2], "bands": ["rank 0", "rank 1"], "ranks_per_band": 1,
                                  "cells": [[0, 0, 0], [0, 1, 7]]}


def test_matrix_bands_sum_the_traffic_between_bands():
    n = 256  # a ring: every rank sends 100 bytes to the next
    matrix = [{"src_rank": r, "dst_rank": (r + 1) % n, "size_bytes": 100, "time_ns": 5} for r in range(n)]
    view = matrix_view(matrix)
    assert view["value"] == "size_bytes" and len(view["labels"]) == 64
    assert sum(v for *_, v in view["cells"]) == 100 * n
    # Within a band of 4 ranks 3 sends stay inside; 1 goes to the next band.
    cells = {(x, y): v for x, y, v in view["cells"]}
    assert cells[(0, 0)] == 300 and cells[(1, 0)] == 100 and cells[(0, 63)] == 100
    assert matrix_view([{"src_rank": 0, "dst_rank": 1, "size_bytes": None, "time_ns": 7}])["value"] == "time_ns"


def test_a_late_rank_is_one_slow_rank_entry_with_its_other_excess_beside_it():
    # Rank 2's own compute is 3 ms longer and its all-reduce's transit 2 ms longer: one entry, the larger first.
    # The others' all-reduce lasts its 4 ms of transit plus 3 ms waiting for rank 2; rank 2's lasts 6 ms.
    ranks = [_rank(r, late_ms=3.0 if r == 2 else 0.0) for r in range(4)]
    for r in ranks:
        comm_ms = 6 if r["rank"] == 2 else 7
        for op in r["comm_ops"]:
            op["dur_ns"] = comm_ms * MS
        for s in r["steps"]:
            s["communication_ns"] = s["communication_not_overlapped_ns"] = comm_ms * MS
    report = combine(ranks)
    (slow,) = report.slow_ranks
    assert (slow.rank, slow.excess_in) == (2, "compute")
    assert [(a["excess_in"], a["excess_ns"]) for a in slow.also_in] == [("communication", pytest.approx(2 * MS))]
