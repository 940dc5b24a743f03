"""Golden tests for traces real tools write (issue 12, items 1-10): tiny inline
traces that show each defect class, and the rows expected."""

from __future__ import annotations

import json

import pytest

from mlprof.errors import TraceFormatError
from mlprof.parse import ParseOptions, parse_path

from .conftest import BASE_NS, parse_one, write_trace
from .test_golden import X


def test_trace_with_runtime_calls_and_no_host_ops_parses(tmp_path):
    events = [X("cudaLaunchKernel", 10.0, 5.0, cat="cuda_runtime", correlation=1),
              X("k", 20.0, 3.0, cat="kernel", pid=0, tid=7, correlation=1)]
    store, _ = parse_one(write_trace(tmp_path / "t.pt.trace.json", events), tmp_path / "out")
    assert store.rows("SELECT name, host_op_id FROM runtime_calls") == [("cudaLaunchKernel", None)]
    assert store.rows("SELECT name, host_op_id FROM device_ops") == [("k", None)]


def test_zero_duration_host_ops_alone_parse(tmp_path):
    store, _ = parse_one(write_trace(tmp_path / "t.pt.trace.json", [X("a", 1.0, 0.0)]), tmp_path / "out")
    assert store.rows("SELECT name, dur_ns, parent_op_id FROM host_ops") == [("a", 0, None)]


@pytest.mark.parametrize("doc, kind", [
    ({"schema": "1.1.1-chakra.0.0.4", "pid": 7, "time": "2024", "start_ts": 1,
      "nodes": [{"id": 1, "name": "[pytorch|profiler|execution_trace|process]"}]}, "PyTorch Execution Trace"),
    ({}, "empty JSON object"),
    ({"foo": 1}, "keys foo"),
])
def test_json_that_is_not_a_kineto_trace_is_refused_by_name(tmp_path, doc, kind):
    path = tmp_path / "x.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(TraceFormatError, match=kind):
        parse_path(path, ParseOptions(output_dir=tmp_path / "out"))
    assert not (tmp_path / "out" / "tables").exists()


def test_absolute_microsecond_times_are_read_to_the_nanosecond(tmp_path):
    # Epoch µs with ns digits: through float64 these round to 250 ns and the
    # child would end after its parent.
    events = [X("parent", "1682725898242253.001", "0.010"), X("child", "1682725898242253.002", "0.009")]
    text = json.dumps({"traceEvents": events}).replace('"1682725898242253.001"', "1682725898242253.001")
    text = text.replace('"1682725898242253.002"', "1682725898242253.002")
    text = text.replace('"0.010"', "0.010").replace('"0.009"', "0.009")
    path = tmp_path / "t.pt.trace.json"
    path.write_text(text)
    store, _ = parse_one(path, tmp_path / "out")
    assert store.rows("SELECT name, start_ns, dur_ns, depth, parent_op_id FROM host_ops ORDER BY start_ns") == [
        ("parent", 1682725898242253001, 10, 0, None),
        ("child", 1682725898242253002, 9, 1, 0),
    ]


def test_decimal_microseconds_to_ns_exactly():
    from mlprof.parse.kineto_events import decimal_us_to_ns

    got = decimal_us_to_ns([b"1682725898242253.123", b"-1.5", b"0", b"1.2345", b"1.2344", b"1e3", b"2.0000"])
    assert got.tolist() == [1682725898242253123, -1500, 0, 1235, 1234, 1_000_000, 2000]


def test_relative_times_with_base_keep_their_ns(tmp_path):
    store, _ = parse_one(write_trace(tmp_path / "t.pt.trace.json", [X("a", 1.001, 2.002)]), tmp_path / "out")
    assert store.rows("SELECT start_ns, dur_ns FROM host_ops") == [(BASE_NS + 1001, 2002)]


def test_nccl_kernels_are_named_by_the_op_that_launched_them(tmp_path):
    send_recv = "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)"
    events = []
    for i, op in enumerate(["nccl:all_reduce", "nccl:all_to_all", "nccl:_all_gather_base"]):
        t = 100.0 * i
        events += [X("record_param_comms", t, 50.0), X(op, t + 1, 40.0, cat="user_annotation"),
                   X("cudaLaunchKernel", t + 2, 3.0, cat="cuda_runtime", correlation=i + 1),
                   X(send_recv, t + 10, 20.0, cat="kernel", pid=0, tid=7, correlation=i + 1)]
    # No launch record: the kernel's own name is all there is.
    events.append(X("ncclKernel_AllReduce_RING_LL_Sum_float", 400.0, 5.0, cat="kernel", pid=0, tid=7,
                    correlation=99))
    store, _ = parse_one(write_trace(tmp_path / "t.pt.trace.json", events), tmp_path / "out")
    assert store.rows("SELECT collective_name FROM collectives ORDER BY start_ns") == [
        ("nccl:all_reduce",), ("nccl:all_to_all",), ("nccl:_all_gather_base",), ("allreduce",)]


def test_device_time_of_a_folded_op_counts_for_the_op_it_folds_into(tmp_path):
    from mlprof.analysis.ops import op_statistic

    events = [X("aten::div", 10.0, 10.0), X("aten::div", 11.0, 8.0),
              X("cudaLaunchKernel", 12.0, 2.0, cat="cuda_runtime", correlation=5),
              X("div_kernel", 20.0, 144.0, cat="kernel", pid=0, tid=7, correlation=5)]
    store, _ = parse_one(write_trace(tmp_path / "t.pt.trace.json", events), tmp_path / "out")
    rows = {r["name"]: r for r in op_statistic(store)}
    assert rows["aten::div"]["count"] == 1
    assert rows["aten::div"]["device_self_ns"] == 144_000
    assert rows["aten::div"]["host_self_ns"] == 8_000


def test_older_launch_flow_categories_give_one_arrow_per_launch_and_instants_no_dur(tmp_path):
    from mlprof.export import ExportOptions, run_exports

    events = [X("aten::mm", 1.0, 10.0), X("cudaLaunchKernel", 2.0, 2.0, cat="cuda_runtime", correlation=7),
              X("gemm", 20.0, 5.0, cat="kernel", pid=0, tid=7, correlation=7),
              {"ph": "i", "s": "t", "name": "note", "pid": 10, "tid": 11, "ts": 3.0, "cat": "instant"}]
    for cat in ("async", "async_cpu_to_gpu", "ac2g"):
        events += [{"ph": "s", "id": 7, "pid": 10, "tid": 11, "ts": 2.0, "cat": cat, "name": cat},
                   {"ph": "f", "id": 7, "pid": 0, "tid": 7, "ts": 20.0, "cat": cat, "name": cat, "bp": "e"}]
    out = tmp_path / "out"
    parse_one(write_trace(tmp_path / "t.pt.trace.json", events), out)
    run_exports(out, ExportOptions())
    doc = json.loads((out / "trace_view.json").read_text())
    starts = [e for e in doc["traceEvents"] if e["ph"] == "s"]
    assert len(starts) == 1
    instants = [e for e in doc["traceEvents"] if e["ph"] == "i"]
    assert instants and all("dur" not in e for e in instants)


def test_directory_scan_finds_traces_by_content_not_name(tmp_path):
    import gzip

    from mlprof.parse.capture_reader import find_inputs

    events = [X("a", 1.0, 2.0)]
    write_trace(tmp_path / "rank0.json", events)
    (tmp_path / "rank1.trace.gz").write_bytes(gzip.compress(json.dumps({"traceEvents": events}).encode()))
    (tmp_path / "array.json").write_text(json.dumps(events))
    (tmp_path / "config.json").write_text('{"lr": 0.1}')
    (tmp_path / "notes.txt").write_text("traceEvents")
    found = sorted(i.path.name for i in find_inputs(tmp_path))
    assert found == ["array.json", "rank0.json", "rank1.trace.gz"]


def test_mtia_runtime_calls_and_device_events_are_modelled(tmp_path):
    events = [X("aten::mm", 1.0, 10.0),
              X("mtiaLaunchKernel", 2.0, 2.0, cat="mtia_runtime", correlation=3),
              X("mm_kernel", 20.0, 5.0, cat="mtia_ccp_events", pid=0, tid=7, correlation=3)]
    store, result = parse_one(write_trace(tmp_path / "t.pt.trace.json", events), tmp_path / "out")
    assert result.unknown_events == {}
    assert store.rows("SELECT r.name, h.name FROM runtime_calls r JOIN host_ops h ON h.op_id = r.host_op_id") == [
        ("mtiaLaunchKernel", "aten::mm")]
    assert store.rows("SELECT d.name, d.kind, h.name FROM device_ops d JOIN host_ops h ON h.op_id = d.host_op_id") == [
        ("mm_kernel", "kernel", "aten::mm")]


def test_query_counts_every_window_and_reparses_after_raw_data_changed(tmp_path):
    import os

    from mlprof.outputs import parsed_outputs as parsed_outputs_of
    from mlprof.analysis.job_info import job_info
    from mlprof.tables.store import TableStore

    from .conftest import make_capture
    from .test_golden import EVENTS

    root = make_capture(tmp_path / "cap", {0: {"events": EVENTS}, 1: {"events": EVENTS[:5]}})

    def events():
        (out,) = parsed_outputs_of(root)
        with TableStore(out.tables_dir) as store:
            return job_info(store, root, out.output_dir).event_count

    assert events() == len(EVENTS) + 5
    trace = root / "raw" / "window_0001" / "kineto.pt.trace.json"
    write_trace(trace, EVENTS[:3])
    later = (root / "mlprof_output" / "parse_info.json").stat().st_mtime_ns + 10**9
    os.utime(trace, ns=(later, later))
    assert events() == len(EVENTS) + 3


def test_decimal_microseconds_to_ns_agree_with_decimal_on_every_shape(monkeypatch):
    """Batches all like Kineto's text (one length, three decimals) take a column-by-column path;
    every other batch the general one. Both must be Decimal's answer, rounded half up."""
    import random
    from decimal import ROUND_HALF_UP, Decimal

    from mlprof.parse import kineto_times

    rng = random.Random(5)
    shapes = {
        "kineto": lambda: f"{rng.randint(10**12, 10**13 - 1)}.{rng.randint(0, 999):03d}",
        "two decimals": lambda: f"{rng.randint(1000, 9999)}.{rng.randint(0, 99):02d}",
        "integers": lambda: f"{rng.randint(10**5, 10**6 - 1)}",
        "epoch us": lambda: f"{rng.randint(10**15, 2 * 10**15)}",
        "leading zero": lambda: f"0{rng.randint(100, 999)}.{rng.randint(0, 999):03d}",
        "negative": lambda: f"-{rng.randint(10, 99)}.{rng.randint(0, 999):03d}",
        "five decimals": lambda: f"{rng.randint(10, 99)}.{rng.randint(0, 99999):05d}",
        "exponent": lambda: f"{rng.randint(1, 9)}.5e3",
        "mixed": lambda: rng.choice([f"{rng.randint(1, 9999)}", f"{rng.randint(1, 999)}.{rng.randint(0, 999):03d}"]),
    }
    uniform = []
    real_uniform = kineto_times._uniform_ns

    def spy(m):
        got = real_uniform(m)
        uniform.append(got is not None)
        return got

    monkeypatch.setattr(kineto_times, "_uniform_ns", spy)
    for name, make in shapes.items():
        for _ in range(200):
            texts = [make().encode() for _ in range(rng.randint(1, 20))]
            want = [int((Decimal(t.decode()) * 1000).to_integral_value(ROUND_HALF_UP)) for t in texts]
            assert kineto_times.decimal_us_to_ns(texts).tolist() == want, (name, texts)
    assert any(uniform) and not all(uniform)  # both paths taken
