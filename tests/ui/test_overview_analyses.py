"""The overview's figures: step time by category and the GPU summary, on the real GPU trace and a CPU trace;
counter and device names the pages show."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from mlprof.analysis.gpu_metrics import gpu_metrics
from mlprof.analysis.step_categories import CATEGORIES, step_categories
from mlprof.analysis.steps import step_breakdown
from mlprof.parse import parse_path
from mlprof.tables import TableStore
from mlprof.ui.labels import counter_label, device_label

from .conftest import make_trace

GPU_TRACE = "ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"


@pytest.fixture(scope="module")
def gpu_store(tmp_path_factory):
    from shared_data import SHARED_TRACES

    if not (SHARED_TRACES / GPU_TRACE).is_file():
        pytest.skip("shared GPU trace not available")
    root = tmp_path_factory.mktemp("gpu")
    trace = root / "rank-0.pt.trace.json.gz"
    shutil.copyfile(SHARED_TRACES / GPU_TRACE, trace)
    out = Path(parse_path(trace)[0].output_dir)
    with TableStore(out / "tables") as store:
        yield store


def test_categories_of_a_gpu_step_add_up_to_the_step_and_follow_the_device_view(gpu_store):
    rows = step_categories(gpu_store)
    steps = {s.step: s for s in step_breakdown(gpu_store)}
    assert [r["step"] for r in rows] == list(steps) and rows
    for r in rows:
        assert r["view"] == "device"
        assert sum(r[f"{c}_ns"] for c in CATEGORIES) == r["dur_ns"]
        s = steps[r["step"]]
        # Busy device time is the step breakdown's computing time, split by what ran.
        assert r["kernel_ns"] + r["memcpy_ns"] + r["memset_ns"] == s.computing_ns
        assert r["runtime_ns"] + r["cpu_exec_ns"] == s.idle_launch_ns + s.idle_synchronization_ns
    assert sum(r["kernel_ns"] for r in rows) > 0.8 * sum(r["dur_ns"] for r in rows)  # a compute-bound V100 job


def test_gpu_summary_of_a_real_trace(gpu_store):
    g = gpu_metrics(gpu_store)
    assert 0.9 < g["utilization"] <= 1.0
    # Overlapping kernels on several streams never count more than all the SMs.
    assert 0 < g["sm_efficiency"] <= g["utilization"]
    assert 0 < g["achieved_occupancy_pct"] <= 100
    one = gpu_metrics(gpu_store, step=102)
    assert one["step_ns"] < g["step_ns"]


def test_a_cpu_run_is_split_by_its_host_view(tmp_path):
    trace = make_trace()
    trace["traceEvents"] = [e for e in trace["traceEvents"] if e.get("cat") not in ("kernel", "cuda_runtime")]
    (tmp_path / "cpu.pt.trace.json").write_text(json.dumps(trace))
    out = Path(parse_path(tmp_path / "cpu.pt.trace.json")[0].output_dir)
    with TableStore(out / "tables") as store:
        rows = step_categories(store)
        steps = {s.step: s for s in step_breakdown(store)}
        assert gpu_metrics(store) is None
    for r in rows:
        s = steps[r["step"]]
        assert r["view"] == "host" and r["kernel_ns"] == r["runtime_ns"] == 0
        assert r["data_loading_ns"] == s.data_loading_ns
        assert r["cpu_exec_ns"] == s.forward_ns + s.backward_ns + s.optimizer_ns + s.other_ns
        assert sum(r[f"{c}_ns"] for c in CATEGORIES) == r["dur_ns"]


@pytest.mark.parametrize("name, series, label, unit", [
    ("host_cpu", "system_percent", "Host CPU: system", "percent"),
    ("host_memory", "job_rss_bytes", "Host memory: job RSS", "bytes"),
    ("host_disk", "read_bytes_per_s", "Host disk: read", "bytes_per_s"),
    ("host_top_processes", "python", "Busiest other processes: python", "percent"),
    ("HBM 0/Read", "Read(MB/s)", "HBM 0/Read", "MB/s"),
    ("LLC 0 Read/Hit Rate", "Hit Rate(%)", "LLC 0 Read/Hit Rate", "percent"),
    ("npu_memory:PTA", "allocated_bytes", "npu memory:PTA: Allocated", "bytes"),
    ("gpu_util", "value", "Gpu util", None),
])
def test_counters_are_named_in_words_with_their_unit(name, series, label, unit):
    assert counter_label(name, series) == (label, unit)


def test_devices_are_named_as_people_call_them():
    assert [device_label(0, -1), device_label(1, 0), device_label(20, 1), device_label(None, None)] == \
        ["CPU", "GPU 0", "NPU 1", "device"]
