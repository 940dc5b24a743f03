"""The dashboard's JSON answers on real runs (trace_filter's two GPU ranks, torch_npu's two Ascend ranks):
every number a page shows beside another agrees with it and with the trace itself."""

from __future__ import annotations

import csv
import gzip
import json
import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

import mlprof
from mlprof.parse import parse_path
from mlprof.ui.server import create_app
from shared_data import SHARED_ASCEND, SHARED_TRACES

from .conftest import api_get

GPU = "gpu/sampled_rank-0_mlprof_output"
NPU = "npu/rank0_ascend_pt/mlprof_output"
V100 = "v100/rank-0_mlprof_output"
V100_TRACE = "ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"
SRC = str(Path(mlprof.__file__).parents[1])


@pytest.fixture(scope="module")
def logdir(tmp_path_factory):
    if not SHARED_TRACES.is_dir() or not SHARED_ASCEND.is_dir():
        pytest.skip("shared real data not available")
    root = tmp_path_factory.mktemp("real")
    (root / "gpu").mkdir()
    for rank in (0, 1):
        shutil.copyfile(SHARED_TRACES / "trace_filter" / f"sampled_rank-{rank}.json.gz",
                        root / "gpu" / f"sampled_rank-{rank}.json.gz")
        shutil.copytree(SHARED_ASCEND / "text" / "level1" / f"rank{rank}_ascend_pt",
                        root / "npu" / f"rank{rank}_ascend_pt")
    (root / "v100").mkdir()
    shutil.copyfile(SHARED_TRACES / V100_TRACE, root / "v100" / "rank-0.pt.trace.json.gz")
    for result in parse_path(root / "gpu") + parse_path(root / "npu") + parse_path(root / "v100"):
        assert result.error is None, result.error
    return root


@pytest.fixture(scope="module")
def client(logdir):
    with TestClient(create_app(logdir), base_url="http://127.0.0.1") as c:
        yield c


get = api_get


def test_data_loading_is_one_number_on_the_overview_and_the_trace_s_own(client, logdir):
    """The tile said 0.628% (3.86 ms), the pie and table 0.309% (1.9 ms): the pie counted only the data
    loading the device sat idle through. The trace's `## data_load ##` spans sum to the tile's number."""
    events = json.loads(gzip.decompress((logdir / "gpu" / "sampled_rank-0.json.gz").read_bytes()))["traceEvents"]
    loading_us = sum(e["dur"] for e in events if e.get("name") == "## data_load ##")
    o = get(client, "/api/overview", run=GPU)
    tile = o["data_loading"]
    assert tile["data_loading_ns"] == loading_us * 1000 == 7_725_000
    (pie,) = [c for c in o["categories"] if c["key"] == "data_loading"]
    assert pie["mean_ns"] * o["step_count"] == tile["data_loading_ns"]
    assert pie["share"] * 100 == pytest.approx(tile["data_loading_pct"])
    table = get(client, "/api/data/step_categories", run=GPU)
    assert sum(r["data_loading_ns"] for r in table) == tile["data_loading_ns"]


def test_raw_data_size_is_known_when_parsed_with_a_relative_path(tmp_path):
    """`mlprof parse trace.json.gz` run in the trace's folder records the relative name; the dashboard, run
    from elsewhere, found nothing there and said "raw data 0 B" where `mlprof query` says 121.3 KiB."""
    if not SHARED_TRACES.is_dir():
        pytest.skip("shared traces not available")
    shutil.copyfile(SHARED_TRACES / "trace_filter" / "sampled_rank-0.json.gz", tmp_path / "rank0.json.gz")
    r = subprocess.run([sys.executable, "-m", "mlprof", "parse", "--tables-only", "rank0.json.gz"], cwd=tmp_path,
                       capture_output=True, text=True, timeout=300, env={**os.environ, "PYTHONPATH": SRC})
    assert r.returncode == 0, r.stderr
    q = subprocess.run([sys.executable, "-m", "mlprof", "query", "--json", str(tmp_path / "rank0_mlprof_output")],
                       capture_output=True, text=True, timeout=300)
    assert q.returncode == 0, q.stderr
    (info,) = json.loads(q.stdout)
    assert info["raw_bytes"] == (tmp_path / "rank0.json.gz").stat().st_size
    with TestClient(create_app(tmp_path), base_url="http://127.0.0.1") as c:
        job = get(c, "/api/overview", run="rank0_mlprof_output")["job"]
    assert job["raw_bytes"] == info["raw_bytes"]
    assert job["source"] == str(tmp_path / "rank0.json.gz")


def test_ascend_allocations_carry_the_op_operator_memory_csv_names(client, logdir):
    """operator_memory.csv names the op of every allocation; the allocations table said "(no op)" for all 184.
    Those of a host op now name it; the GE pool's own (cann::) ops are no host op and stay unnamed."""
    csv_path = logdir / "npu" / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "operator_memory.csv"
    theirs = sorted((round(float(r["Size(KB)"]) * 1024), r["Name"]) for r in csv.DictReader(csv_path.open()))
    host_names = {r["name"] for r in get(client, "/api/data/op_statistic", run=NPU)}
    rows = client.get("/api/data/allocations", params={"run": NPU}).json()
    assert len(rows) == len(theirs) == 184
    ours = sorted((r["size_bytes"], r["op_name"]) for r in rows)
    assert ours == sorted((size, name if name in host_names else "(no op)") for size, name in theirs)
    assert sum(name == "(no op)" for _, name in ours) == 57  # cann::ReduceSum7, cann::trans_TransData_0, ...
    by_op = {r["op_name"]: r["allocations"] for r in get(client, "/api/data/memory_by_op", run=NPU)}
    assert by_op["aten::convolution_backward"] == 14 and by_op["aten::_foreach_add"] == 17


def test_ascend_counters_are_drawn_in_their_units(client, logdir):
    """Bandwidth charts plotted `acc_id` (a constant 27) as a measure; the LLC hit rate, a fraction, sat flat
    at 0 on a 0-100% axis; HBM in KB ran its axis to 2,500,000 unscaled."""
    rows = get(client, "/api/data/counters", run=NPU)
    assert not [r for r in rows if r["series"] == "acc_id"]
    assert {r["name"] for r in rows} >= {"read_bandwidth", "write_band_width"}  # their values are still drawn
    hit = [r["value"] for r in rows if r["name"] == "LLC 0 Read/Hit Rate"]
    assert {r["unit"] for r in rows if r["name"] == "LLC 0 Read/Hit Rate"} == {"percent"}
    assert min(hit) == pytest.approx(77.5) and max(hit) == pytest.approx(92.7)  # l2_cache's 0.775..0.927
    hbm = [r for r in rows if r["name"] == "Device/HBM"]
    assert {r["unit"] for r in hbm} == {"bytes"}
    assert max(r["value"] for r in hbm) == 2409792 * 1024  # the file's KB, in bytes
    npu = [r for r in rows if r["name"] == "HBM 0/Read"]
    assert {r["unit"] for r in npu} == {"bytes_per_s"}


def test_a_slow_rank_names_the_column_its_figures_come_from(client):
    """trace_filter rank 1 is slow by communication transit (167 vs 103 ms per step); the page said
    "communication 167 vs 103 ms" beside a ranks table whose communication column says 190 and 198 ms."""
    c = get(client, "/api/cluster", run=GPU)
    ranks = {r["rank"]: r for r in c["ranks"]}
    (slow,) = [s for s in c["slow_ranks"] if s["excess_in"] == "communication"]
    assert slow["rank"] == 1 and slow["measure_field"] == "transit_ns" and "transit" in slow["measure"]
    assert slow["value_ns"] == ranks[1][slow["measure_field"]] == 167_399_500
    assert slow["median_ns"] == ranks[0][slow["measure_field"]]
    assert ranks[1]["communication_ns"] != slow["value_ns"]


def _finding(client, run, rule):
    (f,) = [f for f in get(client, "/api/advisor", run=run)["findings"] if f["id"] == rule]
    return f


def test_advisor_evidence_links_to_ops_that_exist(client):
    """The Ascend run's communication finding linked to "allreduce": no slice has that name (its host op is
    HcclAllreduce), so the link opened an empty panel. Every evidence op now names a slice."""
    ops = _finding(client, NPU, "communication_overlap")["evidence"]["ops"]
    assert [(o["name"], o.get("collective")) for o in ops] == [("HcclAllreduce", "allreduce")]
    for run, rule in ((NPU, "communication_overlap"), (GPU, "communication_overlap"), (V100, "dominant_op")):
        for op in _finding(client, run, rule)["evidence"]["ops"]:
            r = client.get("/api/timeline/locate", params={"run": run, "name": op["name"]})
            assert r.status_code == 200, (run, op["name"])
    steps = {s["step"] for s in get(client, "/api/data/steps", run=NPU)}
    for f in get(client, "/api/advisor", run=NPU)["findings"]:
        assert {s["step"] for s in f["evidence"]["steps"]} <= steps, f["id"]


def test_launch_bound_finding_counts_cann_launches(client):
    """CANN launches each kernel as Node@launch: the finding said "launches 0" beside 191 kernels."""
    metrics = _finding(client, NPU, "device_idle")["evidence"]["metrics"]
    assert metrics["launches"] == metrics["kernels"] == 191


def test_a_device_timed_op_shows_its_device_time_per_step(client):
    """convolution_backward's finding is about its kernels (212 ms); its per-step evidence was host self time
    (2.3 ms a step). The steps now show the device time, which sums to the finding's."""
    f = _finding(client, V100, "dominant_op")
    metrics, steps = f["evidence"]["metrics"], f["evidence"]["steps"]
    assert metrics["op"] == "aten::convolution_backward" and metrics["device_ns"] > 10 * metrics["host_self_ns"]
    assert all(s["measured_on"] == "device" and s["value_ns"] == s["device_ns"] for s in steps)
    assert sum(s["value_ns"] for s in steps) == metrics["device_ns"]
    assert steps == sorted(steps, key=lambda s: -s["value_ns"])


def test_compare_headline_pairs_steady_steps_and_agrees_with_the_verdict(client):
    """An NPU run's one step against the V100 run's five: the headline paired it with the V100's first step
    (35 ms of host time for the 95 ms of kernels every step runs) and said +344.2% where the verdict said
    +63.2%. By position the longer side's last steps are paired."""
    a = get(client, "/api/compare", base=V100, run=NPU)
    assert a["aligned_by"] == "position"
    (pair,) = a["step_pairs"]
    assert (pair["base_step"], pair["new_step"]) == (105, 50)
    assert a["step_time"]["delta_pct"] == pytest.approx(a["verdict"]["change_pct"], abs=1.0)


def test_hccl_communication_matrix_comes_from_communication_matrix_json(client, logdir):
    """communication_matrix.json lists each rank's links in its 8-rank HCCL group; the cluster matrix was
    empty (torch_npu writes no rank list on the collectives). Each rank now sends to its 7 peers."""
    doc = json.loads((logdir / "npu" / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT" /
                      "communication_matrix.json").read_text())
    links = {link for kind in doc["step50"]["collective"].values() for link in kind}
    peers = sorted({int(link.split("-")[1]) for link in links} - {0})
    assert peers == [1, 2, 3, 4, 5, 6, 7]
    c = get(client, "/api/cluster", run=NPU)
    for rank in (0, 1):
        rows = [m for m in c["matrix"] if m["src_rank"] == rank]
        assert sorted(m["dst_rank"] for m in rows) == [p for p in range(8) if p != rank]
        (coll,) = [x for x in c["collectives"] if x["rank"] == rank]
        assert all(m["size_bytes"] == coll["size_bytes"] and m["bandwidth_gb_per_s"] for m in rows)


def test_ascend_memory_curve_is_one_pool(client, logdir):
    """operator_memory.csv holds two allocators: PTA (rows with a Stream Ptr, 1452 MB reserved) and GE (its
    cann:: ops, 74.75 MB reserved). One curve through both saw-toothed between them; it is PTA's now, and
    every allocation is still listed."""
    csv_path = logdir / "npu" / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "operator_memory.csv"
    pta = [r for r in csv.DictReader(csv_path.open()) if r["Stream Ptr"].strip()]
    assert 0 < len(pta) < 184
    curve = get(client, "/api/data/memory_timeline", run=NPU)
    assert {r["reserved_bytes"] for r in curve} == {1452 * 2**20}
    totals = [float(r[k]) * 2**20 for r in pta for k in ("Allocation Total Allocated(MB)",
                                                         "Release Total Allocated(MB)") if r[k].strip()]
    assert min(r["allocated_bytes"] for r in curve) >= round(min(totals))
    (peak,) = get(client, "/api/data/memory_peak", run=NPU)
    assert peak["peak_allocated_bytes"] == round(max(totals)) and peak["allocations"] == 184


def test_a_host_loop_the_device_hides_says_so(client):
    """ns_resolution_trace: "Host-bound Python loop: 26% of step time" beside a 97% busy GPU needs its
    context: the loop runs while the kernels do, an info finding that says it is hidden."""
    f = _finding(client, V100, "op_storm")
    gpu = get(client, "/api/overview", run=V100)["gpu"]
    assert gpu["utilization"] > 0.9 and f["severity"] == "info"
    assert "hidden behind the device's work" in f["title"], f["title"]


def test_ascend_raw_data_leaves_out_the_parsed_output(client, logdir):
    """A torch_npu rank folder holds its own parsed output (mlprof_output/); raw data counted it too."""
    rank = logdir / "npu" / "rank0_ascend_pt"
    files = [p for p in rank.rglob("*") if p.is_file() and "mlprof_output" not in p.relative_to(rank).parts]
    job = get(client, "/api/overview", run=NPU)["job"]
    assert job["raw_bytes"] == sum(p.stat().st_size for p in files)
    assert job["output_bytes"] > 0
