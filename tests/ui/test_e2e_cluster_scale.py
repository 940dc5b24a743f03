"""The cluster page at 80 ranks in headless Chromium: rank bands, the slowest ranks, the late rank named.

The 80 rank runs are copies of one parsed synthetic trace, each with its own rank in its metadata; the
ranks' cluster data (``cluster_workflow.rank_data``) is replaced by plain rank data with one collective per
step, rank 50 reaching it 3 ms after the others, so the page is drawn from the real cluster analysis
(``combine``) and the real views over it, at a rank count past the page's 64 bands.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from mlprof.parse import parse_path
from mlprof.tables import TableStore
from mlprof.tables.layout import TABLES_DIR
from mlprof.tables.store import replace_table

from .browser import browser, check_charts, page, run_url, serve, shot, wait_page  # noqa: F401
from .conftest import make_trace

RANKS = 80
SLOW = 50
MS = 1_000_000


def _rank_data(rank: int, source: str) -> dict:
    # Every rank's all-reduce ends when the last one arrives (3 ms after the others): 4 ms of transit each.
    late_ms = 3.0 if rank == SLOW else 0.01 * (rank % 3)
    ops = [{"name": "gloo:all_reduce", "grp": "", "step": i, "start_ns": int((i * 20 + 5 + late_ms) * MS),
            "dur_ns": int((4 + 3.0 - late_ms) * MS), "size_bytes": 4000} for i in range(3)]
    steps = [{"window": 0, "step": i, "dur_ns": 13 * MS, "compute_ns": int((6 + late_ms) * MS),
              "communication_ns": int((7 - late_ms) * MS),
              "communication_not_overlapped_ns": int((7 - late_ms) * MS), "free_ns": None,
              "data_loading_ns": 0} for i in range(3)]
    matrix = [{"collective_name": "gloo:all_reduce", "group_name": "", "dst_ranks": [(rank + 1) % RANKS], "count": 3,
               "size_bytes": 12000, "time_ns": 12 * MS, "bandwidth_gb_per_s": None}]
    return {"rank": rank, "source": source, "comm_kind": "host", "steps": steps, "comm_ops": ops, "matrix": matrix}


@pytest.fixture
def many_ranks(tmp_path, monkeypatch):
    trace = tmp_path / "src.pt.trace.json"
    trace.write_text(json.dumps(make_trace(rank=0)))
    (parsed,) = parse_path(trace)
    job = tmp_path / "job"
    job.mkdir()
    rank_of_dir = {}
    for rank in range(RANKS):
        out = job / f"rank{rank:03d}_mlprof_output"
        shutil.copytree(parsed.output_dir, out)
        with TableStore(out / TABLES_DIR) as store:
            meta = store.rows("SELECT key, value_json FROM metadata")
        meta = [(k, json.dumps({"backend": "gloo", "rank": rank, "world_size": RANKS}) if k == "distributedInfo" else v)
                for k, v in meta]
        replace_table(out / TABLES_DIR, "metadata", {"key": np.array([k for k, _ in meta], dtype=object),
                                                      "value_json": np.array([v for _, v in meta], dtype=object),
                                                      "window_index": np.zeros(len(meta), dtype=np.int32)})
        rank_of_dir[out.resolve()] = rank
    (tmp_path / "src_mlprof_output").rename(tmp_path / "elsewhere")  # only the job's ranks in the logdir
    shutil.rmtree(tmp_path / "elsewhere")
    trace.unlink()

    def fake_rank_data(output_dir, source=None):
        return _rank_data(rank_of_dir[Path(output_dir).resolve()], source or str(output_dir))

    monkeypatch.setattr("mlprof.cluster_workflow.rank_data", fake_rank_data)
    return tmp_path


def test_the_cluster_page_at_80_ranks_draws_bands_and_names_the_late_rank(page, many_ranks):
    with serve(many_ranks) as url:
        page.goto(run_url(url, "job/rank000_mlprof_output", "cluster"))
        wait_page(page, "cluster")
        check_charts(page, "#page-cluster")
        assert f"{RANKS} ranks" in page.inner_text("#cluster-ranks")
        # Per-rank charts keep the 20 slowest ranks; steps are the spread across ranks.
        heads = page.inner_text("#page-cluster")
        assert f"Mean step of the 20 slowest of {RANKS} ranks" in heads
        shown = page.evaluate("""() => echarts.getInstanceByDom(document.querySelectorAll('#page-cluster .chart')[0])
                                 .getOption().xAxis[0].data""")
        assert len(shown) == 20 and f"rank {SLOW}" in shown
        spread = page.evaluate("""() => echarts.getInstanceByDom(document.querySelector('#cluster-step-spread .chart'))
                                  .getOption().series.map(s => s.name)""")
        assert spread == ["fastest rank", "median rank", "slowest rank"]
        # Who arrives last: rank 50 first, 3 ms behind.
        late = page.evaluate("""() => echarts.getInstanceByDom(document.querySelector('#cluster-arrivals .chart'))
                                .getOption().yAxis[0].axisLabel.formatter(0)""")
        assert late == f"rank {SLOW}"
        # Lateness and matrix heatmaps: 40 bands of 2 ranks, not 80 rows; the hot band holds rank 50.
        lat = page.evaluate("""() => { const o = echarts.getInstanceByDom(document.querySelector('#cluster-lateness .chart')).getOption();
                                       return {ys: o.yAxis[0].data, cells: o.series[0].data}; }""")
        assert len(lat["ys"]) == RANKS // 2 and lat["ys"][0] == "ranks 0-1"
        hot = max(lat["cells"], key=lambda c: c[2])
        assert lat["ys"][hot[1]] == "ranks 50-51"
        ys = page.evaluate("""() => echarts.getInstanceByDom(document.querySelector('#cluster-matrix .chart')).getOption().yAxis[0].data""")
        assert len(ys) == RANKS // 2
        # One slow-rank entry: its own compute; the others' longer all-reduce is their wait, not transit.
        assert page.inner_text("#slow-ranks").count("rank 50") == 1
        shot(page, "cluster_80_ranks")
        # The header's rank switcher is one picker past 16 ranks; choosing a rank opens its run.
        assert page.query_selector_all("#rank-switch option") and not page.query_selector_all("#rank-switch a")
        page.select_option("#rank-select", "job/rank050_mlprof_output")
        page.wait_for_function("() => location.hash.includes('rank050')")
        # The chosen rank's pages are still loading: leave them before the server stops (a fetch refused by a
        # stopped server is a console error).
        page.goto("about:blank")
