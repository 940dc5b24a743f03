"""Golden tests: a tiny inline trace -> a table -> the exact rows expected."""

from __future__ import annotations

from .conftest import BASE_NS, parse_one, write_trace
from trace_events import X


# One step with a forward op that launches a kernel, a nested op, a memory event.
EVENTS = [
    {"ph": "M", "name": "process_name", "pid": 10, "tid": 0, "args": {"name": "python"}},
    {"ph": "M", "name": "thread_name", "pid": 10, "tid": 11, "args": {"name": "main"}},
    X("ProfilerStep#7", 100.0, 50.0, cat="user_annotation"),
    X("aten::linear", 101.5, 20.25, **{"External id": 1, "Input Dims": [[4, 16], [16, 16]]}),
    X("aten::addmm", 102.0, 10.0, **{"External id": 2}),
    X("cudaLaunchKernel", 103.0, 4.0, cat="cuda_runtime", correlation=77, **{"External id": 2}),
    X("gemm_kernel", 110.0, 30.5, cat="kernel", pid=0, tid=7, device=0, stream=7, correlation=77,
      grid=[8, 1, 1], block=[128, 1, 1]),
    X("ncclKernel_AllReduce_RING_LL_Sum_float", 141.0, 8.0, cat="kernel", pid=0, tid=20, device=0, stream=20,
      correlation=78, **{"Collective name": "allreduce", "In msg nelems": 1000, "Out msg nelems": 1000,
                         "Group size": 2, "dtype": "Float", "Process Group Name": "0",
                         "Process Group Ranks": "[0, 1]"}),
    {"ph": "s", "id": 77, "pid": 10, "tid": 11, "ts": 103.0, "cat": "ac2g", "name": "ac2g"},
    {"ph": "f", "id": 77, "pid": 0, "tid": 7, "ts": 110.0, "cat": "ac2g", "name": "ac2g", "bp": "e"},
    {"ph": "i", "s": "t", "name": "[memory]", "pid": 10, "tid": 11, "ts": 102.5, "cat": "cpu_instant_event",
     "args": {"Total Reserved": 4096, "Total Allocated": 1024, "Bytes": 1024, "Addr": 5000,
              "Device Type": 1, "Device Id": 0}},
    {"ph": "C", "name": "GPU utilization", "pid": 0, "ts": 120.0, "args": {"value": 87.5}},
    {"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (0)", "pid": "Spans", "tid": "PyTorch Profiler",
     "ts": 90.0, "dur": 100.0},
    {"ph": "Q", "name": "from the future", "pid": 1, "tid": 1, "ts": 1.0},
]


def _ns(us: float) -> int:
    return BASE_NS + round(us * 1000)


def test_host_ops_nest_with_self_time_and_absolute_ns(tmp_path):
    store, _ = parse_one(write_trace(tmp_path / "t.pt.trace.json", EVENTS), tmp_path / "out")
    rows = store.rows("SELECT name, start_ns, dur_ns, self_ns, depth, parent_op_id, step, external_id, "
                      "input_dims FROM host_ops ORDER BY start_ns")
    assert rows == [
        ("ProfilerStep#7", _ns(100.0), 50_000, 50_000 - 20_250, 0, None, 7, None, None),
        ("aten::linear", _ns(101.5), 20_250, 20_250 - 10_000, 1, 0, 7, 1, "[[4, 16], [16, 16]]"),
        # addmm's self time excludes the cudaLaunchKernel call it made.
        ("aten::addmm", _ns(102.0), 10_000, 10_000 - 4_000, 2, 1, 7, 2, None),
    ]


def test_device_ops_link_to_launching_op_and_step(tmp_path):
    store, _ = parse_one(write_trace(tmp_path / "t.pt.trace.json.gz", EVENTS), tmp_path / "out")
    rows = store.rows("SELECT d.name, d.kind, d.device, d.stream, d.start_ns, d.dur_ns, h.name, d.step, "
                      "d.grid, d.is_communication FROM device_ops d LEFT JOIN host_ops h "
                      "ON h.op_id = d.host_op_id ORDER BY d.start_ns")
    assert rows == [
        ("gemm_kernel", "kernel", 0, 7, _ns(110.0), 30_500, "aten::addmm", 7, "[8, 1, 1]", False),
        ("ncclKernel_AllReduce_RING_LL_Sum_float", "kernel", 0, 20, _ns(141.0), 8_000, None, 7, None, True),
    ]
    assert store.rows("SELECT name, host_op_id, correlation, step FROM runtime_calls") == [
        ("cudaLaunchKernel", 2, 77, 7)]


def test_collectives_carry_group_and_bytes(tmp_path):
    store, _ = parse_one(write_trace(tmp_path / "t.json", EVENTS), tmp_path / "out")
    assert store.rows("SELECT collective_name, group_name, group_ranks, group_size, dtype, in_nelems, "
                      "size_bytes, dur_ns FROM collectives") == [
        ("allreduce", "0", '"[0, 1]"', 2, "Float", 1000, 4000, 8_000)]


def test_steps_flows_memory_counters_threads(tmp_path):
    store, result = parse_one(write_trace(tmp_path / "t.json", EVENTS), tmp_path / "out")
    assert store.rows("SELECT step, start_ns, end_ns, dur_ns, source FROM steps") == [
        (7, _ns(100.0), _ns(150.0), 50_000, "kineto")]
    assert store.rows("SELECT flow_id, category, start_pid, start_ns, end_pid, end_tid, end_ns FROM flows") == [
        (77, "ac2g", 10, _ns(103.0), 0, 7, _ns(110.0))]
    assert store.rows("SELECT ts_ns, size_bytes, total_allocated_bytes, total_reserved_bytes, device_type, "
                      "host_op_id, step FROM memory_events") == [(_ns(102.5), 1024, 1024, 4096, 1, 2, 7)]
    assert store.rows("SELECT name, series, pid, ts_ns, value FROM counters") == [
        ("GPU utilization", "value", 0, _ns(120.0), 87.5)]
    assert ("process_name", 10, None, "python") in store.rows("SELECT kind, pid, tid, value FROM threads")


def test_unknown_events_are_counted_not_fatal(tmp_path):
    store, result = parse_one(write_trace(tmp_path / "t.json", EVENTS), tmp_path / "out")
    assert sorted(store.rows("SELECT ph, category, count FROM unknown_events")) == [
        ("Q", "", 1), ("X", "Trace", 1)]
    assert result.unknown_events == {"Q/": 1, "X/Trace": 1}


def test_trace_without_base_time_uses_absolute_microseconds(tmp_path):
    path = write_trace(tmp_path / "t.json", [X("aten::add", 1_700_000_000_000_123.5, 2.0)], base_ns=None)
    store, _ = parse_one(path, tmp_path / "out")
    assert store.rows("SELECT start_ns, dur_ns FROM host_ops") == [(1_700_000_000_000_123_500, 2_000)]


def test_bare_json_array_trace_is_accepted(tmp_path):
    path = tmp_path / "array.json"
    path.write_text('[{"ph": "X", "cat": "cpu_op", "name": "aten::mul", "pid": 1, "tid": 1, "ts": 5, "dur": 1}]')
    store, _ = parse_one(path, tmp_path / "out")
    assert store.rows("SELECT name, start_ns, dur_ns FROM host_ops") == [("aten::mul", 5_000, 1_000)]


def test_step_breakdown_golden(tmp_path):
    events = [
        X("ProfilerStep#3", 0.0, 100.0, cat="user_annotation"),
        X("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", 1.0, 9.0),
        X("aten::linear", 10.0, 20.0),
        X("autograd::engine::evaluate_function: AddmmBackward0", 35.0, 25.0),
        X("Optimizer.step#SGD.step", 70.0, 10.0),
        X("gemm", 10.0, 30.0, cat="kernel", pid=0, tid=7, device=0, stream=7),       # [10, 40)
        X("ncclKernel_AllReduce", 30.0, 30.0, cat="kernel", pid=0, tid=9, device=0, stream=9),  # [30, 60)
        X("Memcpy HtoD", 90.0, 20.0, cat="gpu_memcpy", pid=0, tid=7, device=0, stream=7),  # clipped to [90, 100)
    ]
    store, _ = parse_one(write_trace(tmp_path / "t.json", events), tmp_path / "out")
    from mlprof.analysis import step_breakdown

    (s,) = step_breakdown(store)
    assert (s.step, s.dur_ns) == (3, 100_000)
    # Device: compute [10,40) + [90,100) = 40; comm [30,60) = 30; both [30,40) = 10.
    assert (s.computing_ns, s.communication_ns, s.overlapped_ns, s.communication_not_overlapped_ns) == (
        40_000, 30_000, 10_000, 20_000)
    assert (s.preparing_ns, s.free_ns) == (10_000, 100_000 - 60_000 - 10_000)
    # Host: loader [1,10) 9, forward [10,30) 20, backward [35,60) 25, optimizer [70,80) 10.
    # The rest runs no op: Python between ops.
    assert (s.data_loading_ns, s.forward_ns, s.backward_ns, s.optimizer_ns, s.host_communication_ns,
            s.gc_ns, s.python_ns, s.other_ns) == (9_000, 20_000, 25_000, 10_000, 0, 0, 36_000, 0)


def test_operator_memory_pairs_each_allocation_with_its_free(tmp_path):
    def mem(ts, size, addr, total):
        return {"ph": "i", "s": "t", "name": "[memory]", "pid": 10, "tid": 11, "ts": ts, "cat": "cpu_instant_event",
                "args": {"Total Reserved": 8192, "Total Allocated": total, "Bytes": size, "Addr": addr,
                         "Device Type": 0, "Device Id": -1}}

    events = [X("aten::empty", 10.0, 5.0), X("aten::relu", 20.0, 5.0),
              mem(11.0, 256, 7, 256), mem(21.0, 512, 9, 768), mem(30.0, -256, 7, 512)]
    store, _ = parse_one(write_trace(tmp_path / "t.json", events), tmp_path / "out")
    from mlprof.analysis.memory import memory_record, operator_memory

    assert [(r["op_name"], r["size_bytes"], r["lifetime_ns"]) for r in operator_memory(store)] == [
        ("aten::empty", 256, 19_000), ("aten::relu", 512, None)]
    assert [r["total_allocated_bytes"] for r in memory_record(store)] == [256, 768, 512]
