"""Pages on real GPU and Ascend runs say what their numbers are, in headless Chromium (the JSON behind them
is tested in test_real_runs_agree.py)."""

from __future__ import annotations

import shutil

import pytest

from mlprof.parse import parse_path
from shared_data import SHARED_ASCEND, SHARED_TRACES

from .browser import browser, page, run_url, serve, wait_page  # noqa: F401

V100_TRACE = "ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    if not SHARED_TRACES.is_dir() or not SHARED_ASCEND.is_dir():
        pytest.skip("shared real data not available")
    root = tmp_path_factory.mktemp("real_pages")
    (root / "gpu").mkdir()
    (root / "v100").mkdir()
    for rank in (0, 1):
        shutil.copyfile(SHARED_TRACES / "trace_filter" / f"sampled_rank-{rank}.json.gz",
                        root / "gpu" / f"sampled_rank-{rank}.json.gz")
    shutil.copytree(SHARED_ASCEND / "text" / "level1" / "rank0_ascend_pt", root / "npu" / "rank0_ascend_pt")
    shutil.copyfile(SHARED_TRACES / V100_TRACE, root / "v100" / "rank-0.pt.trace.json.gz")
    for result in parse_path(root / "gpu") + parse_path(root / "npu") + parse_path(root / "v100"):
        assert result.error is None, result.error
    with serve(root) as url:
        yield url


def test_npu_overview_says_npu_utilisation(page, site):
    page.goto(run_url(site, "npu/rank0_ascend_pt/mlprof_output", "overview"))
    wait_page(page, "overview")
    label = page.text_content("#tile-gpu-util .tile-label")
    assert label == "NPU utilisation"


def test_worst_data_loading_step_is_not_a_zero(page, site):
    """ns_resolution_trace's steps load no data: the tile said "Worst step #101: 0 ns"."""
    page.goto(run_url(site, "v100/rank-0_mlprof_output", "data_loading"))
    wait_page(page, "data_loading")
    assert page.text_content("#dl-worst .tile-value") == "—"
    assert "no step waited" in page.text_content("#dl-worst")


def test_slow_rank_says_transit(page, site):
    page.goto(run_url(site, "gpu/sampled_rank-0_mlprof_output", "cluster"))
    wait_page(page, "cluster")
    text = page.inner_text("#slow-ranks")
    assert "communication transit (waits left out) 167" in text, text


def test_npu_kernels_page_splits_time_by_compute_unit(page, site):
    """MindInsight's AI Core / AI Vector Core / AI CPU split, with each unit's pipes from the PMU counters."""
    page.goto(run_url(site, "npu/rank0_ascend_pt/mlprof_output", "kernels"))
    wait_page(page, "kernels")
    page.wait_for_selector("#npu-cores table")
    text = page.inner_text("#npu-cores")
    assert "NPU time by compute unit" in text
    for unit in ("AI_VECTOR_CORE", "AI_CORE", "HCCL"):
        assert unit in text, text
    assert "vector core: vector %" in text and "cube core: cube (mac) %" in text, text


def test_gpu_kernels_page_has_no_npu_split(page, site):
    page.goto(run_url(site, "v100/rank-0_mlprof_output", "kernels"))
    wait_page(page, "kernels")
    page.wait_for_selector("#page-kernels table")
    assert page.query_selector("#npu-cores") is None


def test_cluster_says_why_sizes_are_blank(page, site):
    """trace_filter's NCCL kernels carry no collective metadata: the GB/s column is blank, and the page says why."""
    page.goto(run_url(site, "gpu/sampled_rank-0_mlprof_output", "cluster"))
    wait_page(page, "cluster")
    assert "records no message sizes" in page.inner_text("#cluster-sizes-unknown")
