"""The dashboard's JSON API, through an in-process ASGI client (starlette's TestClient)."""

from __future__ import annotations

import csv
import io
import json
import shutil

import warnings

import pytest

with warnings.catch_warnings():
    # starlette announces a move to another httpx package; the client works the same.
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

from mlprof.analysis import kernel_statistic, op_statistic
from mlprof.analysis.advisor import advise
from mlprof.parse import parse_path
from mlprof.tables import TableStore
from mlprof.ui.server import create_app

from .conftest import OPS_PER_STEP, PY_FRAMES_PER_STEP, SLOW_RELU_US, STEPS, api_get, make_trace


@pytest.fixture(scope="module")
def client(logdir):
    with TestClient(create_app(logdir), base_url="http://127.0.0.1") as c:
        yield c


get = api_get


def test_run_list_shows_parsed_runs_and_unparsed_traces(client, run_id, slow_run_id):
    body = get(client, "/api/runs")
    assert [r["id"] for r in body["runs"]] == [run_id, slow_run_id]
    assert [r["name"] for r in body["runs"]] == ["jobs/train", "jobs/train_slow"]
    assert body["runs"][0]["event_count"] > 0
    assert body["unparsed"] == [{"path": "later.pt.trace.json", "kind": "trace"}]


def test_run_list_picks_up_a_run_parsed_after_start(tmp_path):
    (tmp_path / "a.pt.trace.json").write_text(json.dumps(make_trace()))
    with TestClient(create_app(tmp_path), base_url="http://127.0.0.1") as c:
        assert get(c, "/api/runs")["runs"] == []
        parse_path(tmp_path / "a.pt.trace.json")
        assert [r["id"] for r in get(c, "/api/runs")["runs"]] == ["a_mlprof_output"]


def test_logdir_may_be_a_single_output_dir(logdir, run_id):
    with TestClient(create_app(logdir / run_id), base_url="http://127.0.0.1") as c:
        runs = get(c, "/api/runs")["runs"]
        assert [r["id"] for r in runs] == ["."]
        assert len(get(c, "/api/data/steps", run=".")) == STEPS
        assert c.get("/api/data/steps", params={"run": ".."}).status_code == 403


def test_a_reparsed_run_is_read_again(tmp_path):
    trace = tmp_path / "a.pt.trace.json"
    full = make_trace()
    trace.write_text(json.dumps(full))
    parse_path(trace)
    with TestClient(create_app(tmp_path), base_url="http://127.0.0.1") as c:
        run = "a_mlprof_output"
        assert len(get(c, "/api/data/steps", run=run)) == STEPS
        before = get(c, "/api/timeline/meta", run=run)["slice_count"]
        # Keep the first step only (its events come before the second step's data loader).
        cut = next(i for i, e in enumerate(full["traceEvents"]) if e.get("name") == "ProfilerStep#0")
        trace.write_text(json.dumps({**full, "traceEvents": full["traceEvents"][:cut + 1]}))
        parse_path(trace)
        assert len(get(c, "/api/data/steps", run=run)) == 1
        assert get(c, "/api/timeline/meta", run=run)["slice_count"] < before


def test_overview_has_step_time_by_category_gpu_figures_and_the_advisors_findings(client, run_id, logdir):
    o = get(client, "/api/overview", run=run_id)
    assert o["job"]["step_count"] == STEPS == o["step_count"]
    assert [s["step"] for s in o["step_categories"]] == list(range(STEPS))
    # Categories of each step add up to the step; the mean per category to the mean step.
    for s in o["step_categories"]:
        assert sum(s[f"{c['key']}_ns"] for c in o["categories"]) == s["dur_ns"]
    assert sum(c["mean_ns"] for c in o["categories"]) == pytest.approx(o["mean_step_ns"])
    assert o["category_view"] == "device" and o["device"]["kind"] == "gpu"
    kernel = next(c for c in o["categories"] if c["key"] == "kernel")
    assert kernel["label"] == "kernel" and kernel["mean_ns"] > 0
    assert 0 < o["gpu"]["utilization"] <= 1 and o["gpu"]["sm_efficiency"] is None  # no numSms in the fake trace
    assert 0 < o["data_loading"]["data_loading_pct"] < 100
    with TableStore(logdir / run_id / "tables") as store:
        report = json.loads(json.dumps(advise(store).to_dict()))
    assert o["advisor"] == {"available": True, **report}
    one = get(client, "/api/overview", run=run_id, step=1)
    assert one["step_count"] == 1 and [s["step"] for s in one["step_categories"]] == [1]


def test_features_say_which_pages_have_data_and_why_not(client, run_id, tmp_path):
    f = get(client, "/api/features", run=run_id)
    pages = f["features"]
    assert pages["kernels"]["available"] and pages["memory"]["available"] and pages["host"]["available"]
    assert not pages["modules"]["available"] and "nn.Module" in pages["modules"]["reason"]
    assert not pages["cluster"]["available"] and "at least 2 ranks" in pages["cluster"]["reason"]
    assert f["summary"]["step_numbers"] == list(range(STEPS)) and f["ranks"] == []
    assert set(get(client, "/api/features")["datasets"]) == set(f["datasets"])  # without a run: the dataset names
    assert [p[0] for p in f["phases"]["host"]][:3] == ["data_loading_ns", "forward_ns", "backward_ns"]
    cpu = tmp_path / "cpu.pt.trace.json"
    trace = make_trace()
    trace["traceEvents"] = [e for e in trace["traceEvents"] if e.get("cat") not in ("kernel", "cuda_runtime")
                            and e.get("name") != "[memory]" and e.get("ph") != "C"]
    cpu.write_text(json.dumps(trace))
    parse_path(cpu)
    with TestClient(create_app(tmp_path), base_url="http://127.0.0.1") as c:
        pages = get(c, "/api/features", run="cpu_mlprof_output")["features"]
        assert {k for k, v in pages.items() if not v["available"]} == {"kernels", "memory", "host", "modules",
                                                                        "callsites", "cluster", "whole_job"}
        assert "CPU-only" in pages["kernels"]["reason"]
        o = get(c, "/api/overview", run="cpu_mlprof_output")
        assert o["category_view"] == "host" and o["gpu"] is None
        assert {c["key"] for c in o["categories"] if c["mean_ns"]} <= {"data_loading", "cpu_exec", "other"}


def test_run_list_shows_job_rank_device_and_step_time(client):
    runs = get(client, "/api/runs")["runs"]
    first = runs[0]
    assert first["device"] == "GPU (Fake GPU)" and first["device_kind"] == "gpu" and first["steps"] == STEPS
    assert first["mean_step_ns"] > 0 and first["median_step_ns"] > 0 and first["folder"] == "jobs"
    assert "counts" not in first and "step_numbers" not in first


def test_advisor_findings_download(client, run_id, logdir):
    with TableStore(logdir / run_id / "tables") as store:
        findings = advise(store).findings
    r = client.get("/api/advisor", params={"run": run_id, "format": "csv"})
    table = list(csv.DictReader(io.StringIO(r.text)))
    assert [t["id"] for t in table] == [f.id for f in findings]


def test_compare_two_runs(client, run_id, slow_run_id):
    c = get(client, "/api/compare", run=slow_run_id, base=run_id)
    relu_per_step = OPS_PER_STEP // 3
    extra_ns = relu_per_step * (SLOW_RELU_US - 30) * 1000
    assert c["steps"] == STEPS and c["aligned_by"] == "step number"
    assert c["step_time"]["delta_ns"] == extra_ns
    assert next(d for d in c["breakdown"] if d["name"] == "forward")["delta_ns"] == extra_ns
    assert [p["delta_ns"] for p in c["step_pairs"]] == [extra_ns] * STEPS
    rows = list(csv.DictReader(io.StringIO(client.get("/api/compare/breakdown", params={
        "run": slow_run_id, "base": run_id, "format": "csv"}).text)))
    assert {r["name"]: float(r["delta_ns"]) for r in rows}["forward"] == extra_ns
    (summary,) = csv.DictReader(io.StringIO(client.get("/api/compare/summary", params={
        "run": slow_run_id, "base": run_id, "format": "csv"}).text))
    # Flat columns: the verdict and the step time's distributions, no nested objects.
    assert summary["verdict"] == c["verdict"]["verdict"] and int(summary["base_count"]) == STEPS
    assert float(summary["new_median_ns"]) > float(summary["base_median_ns"]) and "{" not in "".join(summary.values())
    assert c["more"] == {k: 0 for k in ("breakdown", "op_types", "ops", "kernels", "memory")} and c["warnings"] == []
    # The page states what op rows measure, and draws where the change comes from.
    assert c["metric"]["key"] == "device" and "device time" in c["metric"]["label"]
    phases = c["waterfalls"][0]
    assert phases["title"].startswith("step time by phase")
    assert phases["base_ns"] + sum(b["delta_ns"] for b in phases["bars"]) == pytest.approx(phases["new_ns"])
    assert [b["name"] for b in phases["bars"]] == ["forward"]
    same = get(client, "/api/compare", run=run_id, base=run_id)
    assert same["step_time"]["delta_ns"] == 0
    assert client.get("/api/compare", params={"run": run_id, "base": "../.."}).status_code == 403
    assert client.get("/api/compare/nope", params={"run": run_id, "base": run_id}).status_code == 400


def test_op_statistic_json_and_csv_agree_with_the_analysis(client, run_id, logdir):
    rows = get(client, "/api/data/op_statistic", run=run_id)
    with TableStore(logdir / run_id / "tables") as store:
        # The analysis's rows, each marked as a framework op or an annotation (charts leave annotations out).
        assert [{k: v for k, v in r.items() if k != "kind"} for r in rows] == json.loads(json.dumps(op_statistic(store)))
    assert {r["name"]: r["kind"] for r in rows}["ProfilerStep*"] == "annotation"
    assert {r["name"]: r["kind"] for r in rows}["aten::conv2d"] == "op"
    conv = next(r for r in rows if r["name"] == "aten::conv2d")
    assert conv["count"] == STEPS * OPS_PER_STEP // 3
    r = client.get("/api/data/op_statistic", params={"run": run_id, "format": "csv", "download": 1})
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/csv")
    assert 'filename="op_statistic.csv"' in r.headers["content-disposition"]
    table = list(csv.DictReader(io.StringIO(r.text)))
    assert [t["name"] for t in table] == [x["name"] for x in rows]
    assert {t["name"]: int(t["host_self_ns"]) for t in table} == {x["name"]: x["host_self_ns"] for x in rows}


def test_every_dataset_downloads_as_csv_and_json(client, run_id):
    features = get(client, "/api/features", run=run_id)
    for name in features["datasets"]:
        # A dataset of one op's or kernel's rows says so; each gets one of this run's.
        needs = features["dataset_names"].get(name)
        extra = {"name": {"op": "aten::conv2d", "kernel": "sgemm_128x64"}[needs]} if needs else {}
        if name in ("memory_timeline", "allocations", "memory_by_op"):
            extra = {"device": "1:0"}
        as_json = get(client, f"/api/data/{name}", run=run_id, **extra)
        r = client.get(f"/api/data/{name}", params={"run": run_id, "format": "csv", **extra})
        assert r.status_code == 200, name
        lines = r.text.splitlines()
        assert len(lines) == len(as_json) + (1 if as_json else 1 if lines else 0), name


def test_operator_drill_down_type_to_shapes_to_calls(client, run_id):
    shapes = get(client, "/api/data/operator_details", run=run_id, name="aten::conv2d")
    assert sorted(s["input_dims"] for s in shapes) == ["[[4, 64]]", "[[8, 3, 32, 32], [16, 3, 3, 3]]"]
    for s in shapes:
        calls = get(client, "/api/data/op_calls", run=run_id, name="aten::conv2d", input_dims=s["input_dims"])
        assert len(calls) == s["count"] == STEPS
        assert all(c["input_dims"] == s["input_dims"] for c in calls)
        assert [c["dur_ns"] for c in calls] == sorted((c["dur_ns"] for c in calls), reverse=True)
    one_step = get(client, "/api/data/op_statistic", run=run_id, step=1)
    assert next(r for r in one_step if r["name"] == "aten::conv2d")["count"] == OPS_PER_STEP // 3


def test_kernels_and_memory(client, run_id, logdir):
    ks = get(client, "/api/data/kernel_statistic", run=run_id)
    with TableStore(logdir / run_id / "tables") as store:
        assert ks == json.loads(json.dumps(kernel_statistic(store)))
    assert {k["name"]: k["count"] for k in ks}["implicit_gemm_conv"] == STEPS * 2
    calls = get(client, "/api/data/kernel_calls", run=run_id, name="implicit_gemm_conv")
    assert {c["host_op"] for c in calls} == {"aten::conv2d"}
    peak = get(client, "/api/data/memory_peak", run=run_id)
    n_alloc = STEPS * OPS_PER_STEP
    assert peak[0]["peak_allocated_bytes"] == 4096 * (n_alloc + 1)
    assert peak[0]["allocations"] == n_alloc
    assert peak[0]["device"] == "GPU 0" and peak[0]["device_key"] == "1:0"
    timeline = get(client, "/api/data/memory_timeline", run=run_id, device="1:0")
    assert max(t["allocated_bytes"] for t in timeline) == peak[0]["peak_allocated_bytes"]
    # Allocations made in a time range, largest first; the range holds the earlier half of them.
    every = get(client, "/api/data/allocations", run=run_id, device="1:0")
    assert len(every) == n_alloc and [a["size_bytes"] for a in every] == sorted((a["size_bytes"] for a in every), reverse=True)
    times = sorted(a["alloc_ns"] for a in every)
    half = get(client, "/api/data/allocations", run=run_id, device="1:0", t0=times[0], t1=times[n_alloc // 2])
    assert len(half) == n_alloc // 2 and all(times[0] <= a["alloc_ns"] < times[n_alloc // 2] for a in half)
    by_op = get(client, "/api/data/memory_by_op", run=run_id, device="1:0", t0=times[0], t1=times[n_alloc // 2])
    assert sum(r["allocations"] for r in by_op) == n_alloc // 2
    assert client.get("/api/data/allocations", params={"run": run_id, "device": "gpu"}).status_code == 400


def test_counters_feed_the_host_page_and_the_timeline(client, run_id):
    rows = [r for r in get(client, "/api/data/counters", run=run_id) if r["name"] == "cpu_util"]
    assert [(r["name"], r["series"], r["value"]) for r in rows] == [("cpu_util", "user", 10.0 + s) for s in range(STEPS)]
    host = get(client, "/api/data/host_resources", run=run_id)
    assert [(h["step"], h["cpu_percent"], h["job_cpu_percent"]) for h in host] == \
        [(s, 50.0 + s, 40.0 + s) for s in range(STEPS)]
    meta = get(client, "/api/timeline/meta", run=run_id)
    # Counter tracks are named in words and carry their unit.
    track = next(t for t in meta["tracks"] if t["name"] == "Cpu util: user")
    assert next(t for t in meta["tracks"] if t["name"] == "Host CPU: system")["unit"] == "percent"
    assert next(t for t in meta["tracks"] if t["name"] == "allocated (GPU 0)")["unit"] == "bytes"
    w = get(client, "/api/timeline/window", run=run_id, t0=0, t1=meta["span_ns"], px=1000)
    assert [v for t, v in zip(w["counters"]["track"], w["counters"]["value"]) if t == track["id"]] == \
        [10.0 + s for s in range(STEPS)]


def test_cluster_of_ranks_in_one_folder_finds_the_slow_rank(tmp_path):
    (tmp_path / "job").mkdir()
    for rank, extra_us in ((0, 0), (1, 400)):
        trace = tmp_path / "job" / f"rank{rank}.pt.trace.json"
        trace.write_text(json.dumps(make_trace(rank=rank, kernel_extra_us=extra_us)))
        parse_path(trace)
    with TestClient(create_app(tmp_path), base_url="http://127.0.0.1") as c:
        answer = get(c, "/api/cluster", run="job/rank0_mlprof_output")
        assert answer["available"] is True
        assert answer["run_of_rank"] == {"0": "job/rank0_mlprof_output", "1": "job/rank1_mlprof_output"}
        f = get(c, "/api/features", run="job/rank1_mlprof_output")
        assert f["features"]["cluster"]["available"]
        assert f["ranks"] == [{"id": "job/rank0_mlprof_output", "rank": 0}, {"id": "job/rank1_mlprof_output", "rank": 1}]
        assert [r["rank"] for r in answer["ranks"]] == [0, 1]
        assert answer["ranks"][1]["compute_ns"] > answer["ranks"][0]["compute_ns"]
        assert [(s["rank"], s["excess_in"]) for s in answer["slow_ranks"]][:1] == [(1, "compute")]
        rows = list(csv.DictReader(io.StringIO(c.get("/api/cluster/ranks", params={
            "run": "job/rank1_mlprof_output", "format": "csv"}).text)))
        assert [r["rank"] for r in rows] == ["0", "1"]
        assert c.get("/api/cluster", params={"run": "../job"}).status_code == 403


def test_timeline_opens_on_the_captured_steps_and_locates_slices(client, run_id, logdir):
    meta = get(client, "/api/timeline/meta", run=run_id)
    steps = meta["steps"]
    assert meta["window"] == {"start": steps[0]["start"], "end": steps[-1]["end"]}
    conv = get(client, "/api/timeline/search", run=run_id, q="aten::conv2d")["hits"][3]
    found = get(client, "/api/timeline/locate", run=run_id, src=conv["src"], id=conv["id"])
    assert (found["start"], found["end"], found["track"], found["depth"]) == (conv["start"], conv["end"], conv["track"],
                                                                              conv["depth"])
    # By name: the longest call, in one step when given.
    step2 = get(client, "/api/timeline/locate", run=run_id, name="enumerate(DataLoader)#_Iter.__next__", step=2)
    assert steps[2]["start"] <= step2["start"] < steps[2]["end"]
    assert client.get("/api/timeline/locate", params={"run": run_id, "name": "nope"}).status_code == 404
    assert client.get("/api/timeline/locate", params={"run": run_id}).status_code == 400


def test_op_calls_say_how_many_there_were_when_cut(client, run_id, monkeypatch):
    from mlprof.ui import datasets

    monkeypatch.setattr(datasets, "ROW_LIMIT", 2)
    r = client.get("/api/data/op_calls", params={"run": run_id, "name": "aten::conv2d"})
    assert len(r.json()) == 2 and r.headers["x-total-rows"] == str(2 * STEPS)


def test_cluster_needs_ranks(client, run_id):
    answer = get(client, "/api/cluster", run=run_id)
    assert answer["available"] is False and "at least 2 ranks" in answer["reason"]


def test_timeline_meta_lists_tracks(client, run_id):
    meta = get(client, "/api/timeline/meta", run=run_id)
    names = [(t["group"], t["name"]) for t in meta["tracks"]]
    assert ("mlprof", "Steps") in names
    assert any(n == "main thread" for _, n in names)
    assert {n for g, n in names if g == "Device 0"} == {"stream 7", "stream 13"}
    assert any(t["kind"] == "counter" for t in meta["tracks"])
    host_ops = STEPS * (1 + 1 + 2 * OPS_PER_STEP + PY_FRAMES_PER_STEP)
    markers = 1
    assert meta["slice_count"] == host_ops + 2 * STEPS * OPS_PER_STEP + STEPS + markers
    python = next(t for t in meta["tracks"] if t["name"] == "main thread python")
    assert python["max_depth"] == PY_FRAMES_PER_STEP - 1
    assert int(meta["origin_ns"]) > 1_600_000_000 * 10**9


def _window(client, run_id, t0, t1, px):
    return get(client, "/api/timeline/window", run=run_id, t0=t0, t1=t1, px=px)


def test_timeline_window_accounts_for_every_slice_at_any_level_of_detail(client, run_id):
    meta = get(client, "/api/timeline/meta", run=run_id)
    fine = _window(client, run_id, 0, meta["span_ns"], 100_000)
    coarse = _window(client, run_id, 0, meta["span_ns"], 8)
    assert sum(fine["slices"]["count"]) == meta["slice_count"] == sum(coarse["slices"]["count"])
    assert max(fine["slices"]["count"]) == 1
    assert max(coarse["slices"]["count"]) > 1
    assert len(coarse["slices"]["track"]) < len(fine["slices"]["track"]) / 3
    # Merged blocks carry no row id; single slices carry their table and id.
    for count, src, ident in zip(coarse["slices"]["count"], coarse["slices"]["src"], coarse["slices"]["id"]):
        assert (count > 1) == (src is None) == (ident is None)


def test_timeline_view_downloads_as_csv(client, run_id):
    meta = get(client, "/api/timeline/meta", run=run_id)
    w = _window(client, run_id, 0, meta["span_ns"], 50)
    r = client.get("/api/timeline/window", params={"run": run_id, "t0": 0, "t1": meta["span_ns"], "px": 50,
                                                   "format": "csv"})
    rows = list(csv.DictReader(io.StringIO(r.text)))
    assert len(rows) == len(w["slices"]["track"])
    assert sum(int(x["count"]) for x in rows) == meta["slice_count"]
    assert min(int(x["start_ns"]) for x in rows) == int(meta["origin_ns"])


def test_timeline_window_returns_only_what_overlaps_it(client, run_id):
    meta = get(client, "/api/timeline/meta", run=run_id)
    step1 = meta["steps"][1]
    t0, t1 = step1["start"] + 50_000, step1["start"] + 200_000
    w = _window(client, run_id, t0, t1, 1000)
    s = w["slices"]
    assert 0 < len(s["track"]) < meta["slice_count"]
    for start, dur in zip(s["start"], s["dur"]):
        assert start < t1 - t0 and start + dur >= 0  # start is relative to t0
    assert w["flows"] is not None and len(w["flows"]) > 0


def test_timeline_search_and_details(client, run_id):
    found = get(client, "/api/timeline/search", run=run_id, q="CONV")
    assert found["total"] == STEPS * 2 * 2  # aten::conv2d ops and implicit_gemm_conv kernels
    assert [h["start"] for h in found["hits"]] == sorted(h["start"] for h in found["hits"])
    op = next(h for h in found["hits"] if h["name"] == "aten::conv2d")
    ev = get(client, "/api/timeline/event", run=run_id, src=op["src"], id=op["id"])
    assert ev["table"] == "host_ops" and ev["row"]["name"] == "aten::conv2d" == ev["name"]
    fields = {f["label"]: f for f in ev["fields"]}
    assert fields["duration"]["kind"] == "ns" and fields["start"]["kind"] == "time" and fields["step"]["value"] == 0
    # Links carry the slice they point at, so the page jumps to exactly that one.
    (kernel,) = ev["links"]["device work launched"]
    assert kernel["name"] == "implicit_gemm_conv" and kernel["src"] == 2
    back = get(client, "/api/timeline/event", run=run_id, src=kernel["src"], id=kernel["id"])
    assert [x["id"] for x in back["links"]["launching op"]] == [op["id"]]
    assert {f["label"]: f["value"] for f in back["fields"]}["runs on"] == "GPU 0, stream 13"
    assert get(client, "/api/timeline/search", run=run_id, q="100%_")["total"] == 0
    marker = get(client, "/api/timeline/search", run=run_id, q="Iteration Start")["hits"][0]
    ev = get(client, "/api/timeline/event", run=run_id, src=marker["src"], id=marker["id"])
    assert ev["table"] == "markers" and ev["row"]["name"] == "Iteration Start: PyTorch Profiler"
    assert client.get("/api/timeline/event", params={"run": run_id, "src": 0, "id": 10**9}).status_code == 404


def test_timeline_range_sums_each_slice_clipped_to_the_range(client, logdir, run_id):
    meta = get(client, "/api/timeline/meta", run=run_id)
    step = meta["steps"][1]
    t0, t1 = step["start"] + 20_000, step["end"] - 20_000  # cuts through the ops at both ends
    got = get(client, "/api/timeline/range", run=run_id, t0=t0, t1=t1)
    lo, hi = int(meta["origin_ns"]) + t0, int(meta["origin_ns"]) + t1
    # Straight from the tables: every slice that overlaps, its part inside.
    expected: dict[tuple[str, str], list[int]] = {}
    with TableStore(logdir / run_id / "tables") as store:
        for kind, sql in (("host op", "SELECT name, start_ns, dur_ns FROM host_ops WHERE category <> 'python_function'"),
                          ("Python function", "SELECT name, start_ns, dur_ns FROM host_ops WHERE category = 'python_function'"),
                          ("runtime call", "SELECT name, start_ns, dur_ns FROM runtime_calls"),
                          ("device op", "SELECT name, start_ns, dur_ns FROM device_ops")):
            for name, start, dur in store.rows(sql):
                inside = min(start + dur, hi) - max(start, lo)
                if start < hi and start + dur >= lo:
                    n, total = expected.get((name, kind), [0, 0])
                    expected[(name, kind)] = [n + 1, total + inside]
    rows = {(r["name"], r["kind"]): [r["count"], r["in_range_ns"]] for r in got["rows"]}
    assert {k: v for k, v in rows.items() if k[1] != "step" and k[1] != "marker"} == expected
    assert rows[(f"ProfilerStep#{step['step']}", "step")] == [1, t1 - t0]
    assert [r["in_range_ns"] for r in got["rows"]] == sorted((r["in_range_ns"] for r in got["rows"]), reverse=True)
    assert got["span_ns"] == t1 - t0 and got["truncated"] is False
    assert {k["kind"]: k["count"] for k in got["kinds"]}["device op"] == sum(
        v[0] for k, v in expected.items() if k[1] == "device op")
    assert client.get("/api/timeline/range", params={"run": run_id, "t0": 5, "t1": 5}).status_code == 400


@pytest.mark.parametrize("bad", ["../..", "/etc", "jobs/../..", "jobs/../../..", "..", "jobs/./train_mlprof_output",
                                 "jobs\\..\\..", "%2e%2e/%2e%2e"])
def test_run_ids_outside_the_logdir_are_refused(client, bad):
    r = client.get("/api/overview", params={"run": bad})
    assert r.status_code in (403, 404)
    assert "refused" in r.json()["error"] or "no parsed run" in r.json()["error"]
    assert "mlprof_output" not in r.text.replace(bad, "")  # nothing of a run is answered


def test_traversal_attempts_get_403(client):
    for bad in ["../..", "/etc", "jobs/../..", ".."]:
        assert client.get("/api/data/steps", params={"run": bad}).status_code == 403


def test_a_symlink_out_of_the_logdir_is_refused(tmp_path, logdir, run_id):
    root = tmp_path / "logs"
    root.mkdir()
    shutil.copytree(logdir / "jobs", tmp_path / "outside")
    (root / "link").symlink_to(tmp_path / "outside", target_is_directory=True)
    with TestClient(create_app(root), base_url="http://127.0.0.1") as c:
        assert get(c, "/api/runs")["runs"] == []
        r = c.get("/api/overview", params={"run": "link/train_mlprof_output"})
        assert r.status_code == 403


def test_static_files_stay_inside_the_package(client):
    for path in ["/static/../server.py", "/static/%2e%2e/server.py", "/static/..%2fserver.py",
                 "/static/../../../../etc/passwd", "/static/%2e%2e/%2e%2e/%2e%2e/%2e%2e/etc/passwd"]:
        r = client.get(path)
        assert r.status_code == 404, path
        assert "import" not in r.text and "root:" not in r.text
    r = client.get("/static/app.js")
    assert r.status_code == 200 and "javascript" in r.headers["content-type"]


def test_index_page_loads_only_local_scripts_under_a_strict_csp(client):
    r = client.get("/")
    assert r.status_code == 200
    assert "http://" not in r.text and "https://" not in r.text
    assert "default-src 'self'" in r.headers["content-security-policy"]


def test_the_dashboard_is_read_only_and_checks_the_host_header(client):
    assert client.post("/api/runs").status_code == 405
    assert client.delete("/api/runs").status_code == 405
    assert client.get("/api/runs", headers={"host": "attacker.example:8080"}).status_code == 403
    assert client.get("/api/runs", headers={"host": "localhost:8080"}).status_code == 200


def test_a_broken_table_file_is_a_json_error_and_the_server_goes_on(tmp_path, logdir, run_id):
    shutil.copytree(logdir / "jobs", tmp_path / "jobs")
    (tmp_path / run_id / "tables" / "device_ops.parquet").write_bytes(b"not parquet")
    with TestClient(create_app(tmp_path), base_url="http://127.0.0.1") as c:
        r = c.get("/api/data/kernel_statistic", params={"run": run_id})
        assert r.status_code == 500 and r.json()["error"].startswith("internal error:")
        assert get(c, "/api/runs")["runs"]


def test_bad_parameters_are_one_line_errors(client, run_id):
    assert client.get("/api/data/nope", params={"run": run_id}).status_code == 400
    assert client.get("/api/data/steps", params={"run": run_id, "step": "x"}).status_code == 400
    assert client.get("/api/data/steps", params={"run": run_id, "format": "xml"}).status_code == 400
    assert client.get("/api/timeline/window", params={"run": run_id, "t0": 5, "t1": 5}).status_code == 400
    assert client.get("/api/timeline/search", params={"run": run_id, "q": ""}).status_code == 400


def test_overview_has_the_training_metrics_a_run_logged(tmp_path):
    torch = pytest.importorskip("torch")
    import mlprof

    model = torch.nn.Linear(16, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    logged = {}
    with mlprof.profile(activities=[mlprof.ProfilerActivity.CPU],
                        schedule=mlprof.schedule(wait=0, warmup=1, active=3, repeat=1),
                        on_trace_ready=mlprof.tensorboard_trace_handler(str(tmp_path / "logs"))) as prof:
        for _ in range(5):
            loss = model(torch.randn(8, 16)).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            logged[prof.step_num] = loss.item()
            mlprof.log_scalar("loss", loss.item())
            mlprof.log_scalar("samples_per_second", 1000.0 + prof.step_num)
            prof.step()
    (cap,) = [p for p in (tmp_path / "logs").iterdir() if p.name.endswith("_mlprof")]
    parse_path(cap)
    with TestClient(create_app(tmp_path / "logs"), base_url="http://127.0.0.1") as c:
        (run,) = get(c, "/api/runs")["runs"]
        rows = get(c, "/api/overview", run=run["id"])["training_metrics"]
    assert [r["step"] for r in rows] == sorted(logged)
    assert all(r["loss"] == pytest.approx(logged[r["step"]]) for r in rows)
    assert all(r["samples_per_second"] == 1000.0 + r["step"] for r in rows)
    assert any(r["dur_ns"] for r in rows)  # profiled steps carry their step time
