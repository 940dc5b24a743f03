"""Every command on real torch_npu output, as a user runs it (a real subprocess)."""

from __future__ import annotations

import csv
import json
import shutil
import sqlite3
import warnings

import pytest

from shared_data import SHARED_ASCEND, SHARED_TRACES

from .conftest import run_cli

GPU_TRACE = SHARED_TRACES / "ns_resolution_trace" / "rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    """Both ranks of the level1 text export, copied (mlprof writes beside its input) and parsed once."""
    if not SHARED_ASCEND.is_dir():
        pytest.skip(f"shared Ascend data not found at {SHARED_ASCEND}")
    root = tmp_path_factory.mktemp("npu") / "alexnet"
    shutil.copytree(SHARED_ASCEND / "text" / "level1", root)
    r = run_cli("parse", str(root), "--json")
    assert r.returncode == 0, r.stderr
    results = json.loads(r.stdout)
    results = results if isinstance(results, list) else results.get("results", results)
    assert [x["kind"] for x in results] == ["ascend_text", "ascend_text"]
    return root


def _json(*args):
    r = run_cli(*args, "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_query_shows_rank_device_and_the_step(job):
    (info,) = _json("query", str(job / "rank1_ascend_pt"))
    assert info["rank"] == 1 and info["devices"] == [1] and info["step_count"] == 1
    assert info["slowest_steps"][0]["step"] == 50


def test_advise_points_at_exposed_communication_and_idle_device(job):
    report = _json("advise", str(job / "rank0_ascend_pt"), "--no-write")
    report = report[0] if isinstance(report, list) else report
    ids = {f["id"] for f in report["findings"]}
    assert "communication_overlap" in ids and "device_idle" in ids
    # 19 aclopCompileAndExecute calls, 14 ms of the 156 ms step
    compile_ = next(f for f in report["findings"] if f["id"] == "npu_op_compile")
    assert 0.08 < compile_["share"] < 0.10 and "jit_compile=False" in compile_["fix"]
    assert "ai_cpu_ops" in report["rules_run"] and "ai_cpu_ops" not in ids  # this job has no AI CPU op
    for f in report["findings"]:
        assert 0 <= f["share"] <= 1
        assert "torch.cuda" not in f["fix"] and "CUDA" not in f["fix"], f["id"]


def test_advise_finds_ops_on_the_ai_cpu(job, tmp_path):
    """Seed 002's case: the same real data with one op type moved to the AI CPU."""
    root = tmp_path / "rank0_ascend_pt"
    shutil.copytree(job / "rank0_ascend_pt", root, ignore=shutil.ignore_patterns("mlprof_output"))
    path = root / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
    with open(path, newline="") as fh:
        rows = list(csv.reader(fh))
    core = rows[0].index("Accelerator Core")
    for row in rows[1:]:
        if row[rows[0].index("Type")] == "ForeachAddList":
            row[core] = "AI_CPU"
    with open(path, "w", newline="") as fh:
        csv.writer(fh).writerows(rows)
    report = _json("advise", str(root), "--no-write", "--threshold", "ai_cpu_warn_share=0.01")
    report = report[0] if isinstance(report, list) else report
    found = [f for f in report["findings"] if f["id"] == "ai_cpu_ops"]
    assert len(found) == 1 and found[0]["evidence"]["ops"][0]["name"] == "ForeachAddList"
    assert found[0]["evidence"]["ops"][0]["count"] == 3


def test_op_groups_an_aten_op_by_shape_with_npu_device_time(job):
    out = _json("op", str(job / "rank0_ascend_pt"), "--name", "aten::convolution")
    text = json.dumps(out)
    assert "aten::convolution" in text and "[32, 3, 224, 224]" in text


def test_export_text_and_db(job, tmp_path):
    out = tmp_path / "export"
    r = run_cli("export", str(job / "rank0_ascend_pt"), "--output", str(out), "--export-type", "text",
                "--export-type", "db")
    assert r.returncode == 0, r.stderr
    for name in ("trace_view.json", "kernel_details.csv", "op_statistic.csv", "step_trace_time.csv"):
        assert (out / name).is_file(), name
    trace = json.loads((out / "trace_view.json").read_text())
    assert any(e.get("name") == "hcom_allReduce__586_0_1" for e in trace["traceEvents"])
    (db_path,) = out.glob("*.db")
    con = sqlite3.connect(db_path)
    try:
        assert con.execute("SELECT count(*) FROM device_ops").fetchone()[0] == 215
        assert con.execute("SELECT count(*) FROM device_op_details").fetchone()[0] == 215
    finally:
        con.close()
    r = run_cli("export", str(job / "rank0_ascend_pt"), "--output", str(tmp_path / "j"), "--summary-format", "json")
    assert r.returncode == 0, r.stderr


def test_cluster_of_the_two_npu_ranks(job):
    answer = _json("cluster", str(job))
    text = json.dumps(answer)
    assert '"rank": 0' in text and '"rank": 1' in text
    assert "allreduce" in text


def test_compare_npu_with_gpu_says_the_devices_differ(job):
    if not GPU_TRACE.is_file():
        pytest.skip("shared GPU trace not found")
    gpu = job.parent / GPU_TRACE.name
    shutil.copy(GPU_TRACE, gpu)
    c = _json("compare", str(job / "rank0_ascend_pt"), str(gpu))
    assert c["cross_device"] is True
    assert c["base_device"]["kind"] == "npu" and c["new_device"]["kind"] == "gpu"
    assert any("devices differ" in n for n in c["notes"])
    assert c["step_time"]["base_ns"] == 155_985_800  # ProfilerStep#50 of the NPU run
    assert all(d["name"].startswith("aten::") for d in c["op_types"])
    assert {d["detail"]["present_in"] for d in c["kernels"]} <= {"base", "new"}  # no kernel is on both devices
    r = run_cli("compare", str(job / "rank0_ascend_pt"), str(gpu))
    assert r.returncode == 0, r.stderr
    assert "[NPU (Ascend NPU)]" in r.stdout and "[GPU (" in r.stdout and "note: devices differ" in r.stdout


@pytest.mark.parametrize("file,cut", [("kernel_details.csv", True), ("trace_view.json", True),
                                      ("kernel_details.csv", False)])
def test_bad_npu_output_is_a_one_line_error_naming_the_file(tmp_path, file, cut):
    if not SHARED_ASCEND.is_dir():
        pytest.skip("shared Ascend data not found")
    root = tmp_path / "rank0_ascend_pt"
    shutil.copytree(SHARED_ASCEND / "text" / "level1" / "rank0_ascend_pt", root)
    path = root / "ASCEND_PROFILER_OUTPUT" / file
    if cut:
        path.write_bytes(path.read_bytes()[:5000])
    else:
        path.unlink()
    r = run_cli("parse", str(root))
    assert r.returncode not in (0, 1), r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and file in lines[0] and "Traceback" not in r.stderr


def test_corrupt_db_is_a_one_line_error(tmp_path):
    if not SHARED_ASCEND.is_dir():
        pytest.skip("shared Ascend data not found")
    root = tmp_path / "rank0_ascend_pt"
    shutil.copytree(SHARED_ASCEND / "db" / "level1" / "rank0_ascend_pt", root)
    db = root / "ASCEND_PROFILER_OUTPUT" / "ascend_pytorch_profiler_0.db"
    db.write_bytes(db.read_bytes()[:4096])  # the header page only
    r = run_cli("parse", str(root))
    assert r.returncode not in (0, 1)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "ascend_pytorch_profiler_0.db" in lines[0]


def test_dashboard_api_serves_an_npu_run(job):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from starlette.testclient import TestClient
    from mlprof.ui.server import create_app

    run = "rank0_ascend_pt/mlprof_output"
    with TestClient(create_app(job), base_url="http://127.0.0.1") as c:
        def get(path, **params):
            r = c.get(path, params=params)
            assert r.status_code == 200, (path, r.text)
            return r.json()

        assert get("/api/overview", run=run)
        features = get("/api/features")
        for name in features["datasets"]:
            needs = features["dataset_names"].get(name)
            extra = {"name": {"op": "aten::convolution", "kernel": "Conv2D1"}[needs]} if needs else {}
            get(f"/api/data/{name}", run=run, **extra)
        ks = get("/api/data/kernel_statistic", run=run)
        assert any(k["name"].startswith("hcom_allReduce") for k in ks)
        meta = get("/api/timeline/meta", run=run)
        get("/api/timeline/window", run=run, t0=0, t1=meta["span_ns"], px=500)
        cluster = get("/api/cluster", run=run)
        assert cluster["available"] is True and [r["rank"] for r in cluster["ranks"]] == [0, 1]
        same = get("/api/compare", run=run, base="rank1_ascend_pt/mlprof_output")
        assert same


def test_compare_npu_with_cpu_run(job):
    cpu_trace = SHARED_TRACES / "cpu_only" / "rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz"
    if not cpu_trace.is_file():
        pytest.skip("shared CPU trace not found")
    cpu = job.parent / cpu_trace.name
    shutil.copy(cpu_trace, cpu)
    c = _json("compare", str(cpu), str(job / "rank1_ascend_pt"))
    assert c["cross_device"] is True
    assert (c["base_device"]["kind"], c["new_device"]["kind"]) == ("cpu", "npu")
    assert c["notes"] and "base ran on CPU, new on NPU (Ascend NPU)" in c["notes"][0]
    assert c["step_time"]["new_ns"] == 153_888_390  # ProfilerStep#50 of NPU rank 1


def test_parse_of_npu_output_needs_no_torch(tmp_path):
    if not SHARED_ASCEND.is_dir():
        pytest.skip("shared Ascend data not found")
    src = SHARED_ASCEND / "db" / "level1" / "rank1_ascend_pt"
    r = run_cli("parse", str(src), "--output", str(tmp_path / "out"), "--json", block_torch=True)
    assert r.returncode == 0, r.stderr
    assert '"ascend_db"' in r.stdout


def test_dashboard_lists_an_unparsed_npu_rank_folder(tmp_path):
    if not SHARED_ASCEND.is_dir():
        pytest.skip("shared Ascend data not found")
    from mlprof.ui.api import runs_answer

    shutil.copytree(SHARED_ASCEND / "db" / "level1", tmp_path / "job")
    answer = runs_answer(tmp_path)
    assert answer["runs"] == []
    assert answer["unparsed"] == [{"path": "job/rank0_ascend_pt", "kind": "ascend"},
                                  {"path": "job/rank1_ascend_pt", "kind": "ascend"}]
