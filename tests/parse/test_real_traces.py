"""The shared real GPU traces: every kind of event lands in the tables, with exact numbers."""

from __future__ import annotations

import gzip
import json
import statistics
from collections import defaultdict

import pytest

from mlprof.analysis import kernel_statistic, step_breakdown

from mlprof.tables.schema import TABLES

from shared_data import GPU_TRACES

from .conftest import parse_one

NCCL_TRACE = "nccl_parser_config/nccl_data.json.gz"
NS_TRACE = "ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"

DEVICE_CATS = {"kernel": "kernel", "gpu_memcpy": "memcpy", "gpu_memset": "memset"}


def _load(path):
    return json.loads(gzip.decompress(path.read_bytes()))


def _direct_kernel_sums(doc) -> dict[tuple[str, str], tuple[int, int]]:
    """(name, kind) -> (count, total ns), straight from the JSON."""
    sums = defaultdict(lambda: [0, 0])
    for ev in doc["traceEvents"]:
        if ev.get("ph") == "X" and ev.get("cat") in DEVICE_CATS:
            entry = sums[(ev["name"], DEVICE_CATS[ev["cat"]])]
            entry[0] += 1
            entry[1] += round(ev["dur"] * 1000)
    return {k: tuple(v) for k, v in sums.items()}


@pytest.mark.parametrize("name", GPU_TRACES)
def test_kernel_time_per_name_equals_direct_sum_over_the_trace(shared_traces, tmp_path, name):
    path = shared_traces / name
    store, result = parse_one(path, tmp_path / "out")
    ours = {(r["name"], r["kind"]): (r["count"], r["total_ns"]) for r in kernel_statistic(store)}
    assert ours == _direct_kernel_sums(_load(path))
    assert result.event_count == len(_load(path)["traceEvents"])


@pytest.mark.parametrize("name", GPU_TRACES)
def test_step_columns_add_up_to_step_time(shared_traces, tmp_path, name):
    store, _ = parse_one(shared_traces / name, tmp_path / "out")
    steps = step_breakdown(store)
    for s in steps:
        assert s.dur_ns > 0
        assert s.computing_ns + s.communication_not_overlapped_ns + s.free_ns + s.preparing_ns == s.dur_ns
        assert s.overlapped_ns + s.communication_not_overlapped_ns == s.communication_ns
        assert min(s.computing_ns, s.free_ns, s.preparing_ns, s.overlapped_ns) >= 0
        assert s.data_loading_ns + s.forward_ns + s.backward_ns + s.optimizer_ns + s.host_communication_ns \
            + s.gc_ns + s.python_ns + s.other_ns == s.dur_ns
    profiler_steps = sorted((ev for ev in _load(shared_traces / name)["traceEvents"]
                             if ev.get("cat") == "user_annotation" and str(ev.get("name", "")).startswith("ProfilerStep#")),
                            key=lambda ev: ev["ts"])
    # Every ProfilerStep is a step, but a last one the profiler's stop cut (a tenth of the others or less: the
    # ROCm trace's 0.049 ms step of one op after a 9.29 ms one).
    cut = profiler_steps[-1]["dur"] <= 0.1 * statistics.median(ev["dur"] for ev in profiler_steps[:-1]) \
        if len(profiler_steps) >= 2 else False
    assert len(steps) == len(profiler_steps) - cut
    assert (name == "amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz") == cut


def test_nccl_collectives_keep_their_metadata(shared_traces, tmp_path):
    path = shared_traces / "nccl_parser_config/nccl_data.json.gz"
    store, _ = parse_one(path, tmp_path / "out")
    expected = sorted(
        (ev["args"]["Collective name"], ev["args"]["In msg nelems"], ev["args"]["dtype"], round(ev["dur"] * 1000))
        for ev in _load(path)["traceEvents"] if ev.get("cat") == "kernel" and "Collective name" in ev["args"])
    got = sorted(store.rows("SELECT collective_name, in_nelems, dtype, dur_ns FROM collectives"))
    assert got == expected and len(got) > 0
    # allreduce of floats: 4 bytes per element.
    assert store.rows("SELECT DISTINCT size_bytes = in_nelems * 4 FROM collectives WHERE dtype = 'Float'") == [(True,)]
    # Communication takes a share of the steps, overlapped or not.
    assert sum(s.communication_ns for s in step_breakdown(store)) > 0


def test_flows_and_launch_links_cover_every_kernel(shared_traces, tmp_path):
    path = shared_traces / "ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"
    store, _ = parse_one(path, tmp_path / "out")
    doc = _load(path)
    starts = {(ev.get("cat"), ev["id"]) for ev in doc["traceEvents"] if ev.get("ph") == "s"}
    ends = {(ev.get("cat"), ev["id"]) for ev in doc["traceEvents"] if ev.get("ph") == "f"}
    assert store.count("flows") == len(starts & ends) > 0
    unlinked = store.rows("SELECT count(*) FROM device_ops WHERE kind = 'kernel' AND host_op_id IS NULL")[0][0]
    assert unlinked == 0


def test_amd_trace_parses_hip_calls_and_kernels(shared_traces, tmp_path):
    store, _ = parse_one(shared_traces / "amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz", tmp_path / "out")
    assert store.rows("SELECT count(*) > 0 FROM runtime_calls WHERE name LIKE 'hip%'") == [(True,)]
    assert store.rows("SELECT count(*) FROM device_ops WHERE kind = 'kernel'")[0][0] == 14


def test_cpu_only_trace_has_host_split_and_no_device_columns(shared_traces, tmp_path):
    store, _ = parse_one(shared_traces / "cpu_only/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz", tmp_path / "out")
    assert store.count("device_ops") == 0
    steps = step_breakdown(store)
    for s in steps:
        assert s.computing_ns is None and s.free_ns is None
        assert s.data_loading_ns + s.forward_ns + s.backward_ns + s.optimizer_ns + s.host_communication_ns \
            + s.gc_ns + s.python_ns + s.other_ns == s.dur_ns


def test_kernel_breakdown_agrees_with_holistic_trace_analysis(shared_traces, tmp_path):
    pytest.importorskip("hta", reason="HolisticTraceAnalysis not installed (pip install -e .[bench])")
    from hta.trace_analysis import TraceAnalysis

    trace_dir = shared_traces / "nccl_parser_config"
    analyzer = TraceAnalysis(trace_dir=str(trace_dir))
    _, per_kernel = analyzer.get_gpu_kernel_breakdown(visualize=False, duration_ratio=1.0, num_kernels=10**6)
    # HTA keeps only some iterations (it drops the last one): compare on those.
    iterations = sorted(int(i) for i in analyzer.t.get_trace(0)["iteration"].unique() if i >= 0)
    store, _ = parse_one(trace_dir / "nccl_data.json.gz", tmp_path / "out")
    ours = defaultdict(lambda: [0, 0])
    for step in iterations:
        for r in kernel_statistic(store, step):
            ours[r["name"]][0] += r["count"]
            ours[r["name"]][1] += r["total_ns"]
    hta = {r["name"]: (round(r["sum (us)"] / r["mean (us)"]) if r["mean (us)"] else 0, r["sum (us)"])
           for r in per_kernel.to_dict("records")}
    assert set(hta) == set(ours)
    for name, (count, total_ns) in ours.items():
        hta_count, hta_total_us = hta[name]
        assert hta_count == count, name
        # HTA cuts ns-resolution times down to whole µs (start and end), so
        # each of its durations is short by up to ~1 µs, never long.
        assert total_ns / 1000 - 2 * count <= hta_total_us <= total_ns / 1000 + 1e-6, name


@pytest.mark.parametrize("name, workers", [(NCCL_TRACE, 3), (NS_TRACE, 2)])
def test_parallel_parse_gives_the_same_tables(shared_traces, tmp_path, monkeypatch, name, workers):
    monkeypatch.setenv("MLPROF_PARSE_WORKERS", "1")
    sequential, _ = parse_one(shared_traces / name, tmp_path / "seq")
    monkeypatch.setenv("MLPROF_PARSE_WORKERS", str(workers))
    parallel, _ = parse_one(shared_traces / name, tmp_path / "par")
    for table in TABLES:
        cols = ", ".join(f'"{c}"' for c in TABLES[table].column_names)
        assert sorted(sequential.rows(f"SELECT {cols} FROM {table}"), key=repr) == \
            sorted(parallel.rows(f"SELECT {cols} FROM {table}"), key=repr), table
