"""Attribution golden tests: each rule on a tiny inline trace, and exact sums on every real trace.

Times are microseconds in the traces (Kineto's unit), nanoseconds in the tables.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from shared_data import H200_TRACE, SHARED_TRACES

from mlprof.analysis import step_breakdown
from mlprof.parse import ParseOptions, parse_path
from mlprof.tables.store import TableStore

from .conftest import BASE_NS, make_capture, parse_one, write_trace
from .test_golden import X

US = 1_000


def step_phases(store: TableStore, view: str = "host") -> dict[str, int]:
    return {phase: int(ns) // US for phase, ns in store.rows(
        "SELECT phase, sum(dur_ns) FROM phase_spans WHERE view = ? GROUP BY phase", [view])}


def parsed(tmp_path, events) -> TableStore:
    store, _ = parse_one(write_trace(tmp_path / "t.json", events), tmp_path / "out")
    return store


def test_closure_forward_and_backward_inside_optimizer_step(tmp_path):
    # LBFGS / Lightning: optimizer.step(closure) runs forward and backward inside Optimizer.step.
    store = parsed(tmp_path, [
        X("ProfilerStep#1", 0.0, 100.0, cat="user_annotation"),
        X("Optimizer.step#LBFGS.step", 10.0, 80.0, cat="user_annotation"),
        X("aten::linear", 15.0, 15.0),
        X("autograd::engine::evaluate_function: AddmmBackward0", 40.0, 30.0),
        X("aten::add_", 75.0, 10.0),
    ])
    assert step_phases(store) == {"python": 20, "forward": 30, "backward": 30, "optimizer": 20}


def test_nested_phase_annotations_win_over_their_parents(tmp_path):
    store = parsed(tmp_path, [
        X("ProfilerStep#1", 0.0, 100.0, cat="user_annotation"),
        X("train_step", 0.0, 100.0, cat="user_annotation"),
        X("## load_batch ##", 0.0, 10.0, cat="user_annotation"),
        X("## forward ##", 10.0, 30.0, cat="user_annotation"),
        X("aten::mm", 12.0, 20.0),
        X("## backward ##", 40.0, 30.0, cat="user_annotation"),
        X("## optimizer ##", 70.0, 20.0, cat="user_annotation"),
        X("aten::add_", 72.0, 10.0),
        X("log_metrics", 90.0, 10.0, cat="user_annotation"),
    ])
    # train_step and log_metrics name no phase: their op time is forward before the backward, other after it.
    assert step_phases(store) == {"data_loading": 10, "forward": 30, "backward": 30, "optimizer": 20, "other": 10}


def test_unnamed_ops_are_forward_before_the_backward_and_other_after(tmp_path):
    store = parsed(tmp_path, [
        X("ProfilerStep#1", 0.0, 100.0, cat="user_annotation"),
        X("aten::mse_loss", 10.0, 10.0),
        X("autograd::engine::evaluate_function: MseLossBackward0", 20.0, 20.0),
        X("Optimizer.step#SGD.step", 40.0, 20.0, cat="user_annotation"),
        X("aten::item", 70.0, 10.0),
    ])
    assert step_phases(store) == {"python": 40, "forward": 10, "backward": 20, "optimizer": 20, "other": 10}


def test_backward_and_collectives_on_other_threads_fill_the_main_threads_gaps(tmp_path):
    # GPU jobs: the autograd engine runs backward on its own thread while the main thread waits in Python.
    store = parsed(tmp_path, [
        X("ProfilerStep#1", 0.0, 100.0, cat="user_annotation"),
        X("aten::linear", 0.0, 30.0),
        X("autograd::engine::evaluate_function: AddmmBackward0", 30.0, 40.0, tid=99),
        X("gloo:all_reduce", 60.0, 20.0, tid=98),
        X("Optimizer.step#SGD.step", 85.0, 10.0, cat="user_annotation"),
    ])
    assert step_phases(store) == {"forward": 30, "backward": 40, "communication": 10, "python": 10,
                                  "optimizer": 10}


def test_phase_spans_partition_each_step_in_both_views(tmp_path):
    store = parsed(tmp_path, [
        X("ProfilerStep#1", 0.0, 100.0, cat="user_annotation"),
        X("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", 0.0, 30.0),
        X("aten::linear", 30.0, 20.0),
        X("cudaLaunchKernel", 31.0, 2.0, cat="cuda_runtime", correlation=1),
        X("gemm", 35.0, 10.0, cat="kernel", pid=0, tid=7, device=0, stream=7, correlation=1),
        X("cudaStreamSynchronize", 52.0, 8.0, cat="cuda_runtime"),
        X("Memcpy DtoH", 55.0, 3.0, cat="gpu_memcpy", pid=0, tid=7, device=0, stream=7),
        X("aten::add", 70.0, 10.0),
        X("cudaLaunchKernel", 71.0, 2.0, cat="cuda_runtime", correlation=2),
        X("add_kernel", 80.0, 5.0, cat="kernel", pid=0, tid=7, device=0, stream=7, correlation=2),
    ])
    rows = store.rows("SELECT phase, coalesce(cause, ''), start_ns, end_ns FROM phase_spans "
                      "WHERE view = 'device' ORDER BY start_ns")
    spans = [(phase, cause, (a - BASE_NS) // US, (b - BASE_NS) // US) for phase, cause, a, b in rows]
    assert spans == [
        ("idle", "data_loading", 0, 30),   # before any kernel, while the host loads data
        ("idle", "launch", 30, 35),        # the host is in aten::linear, issuing the kernel
        ("compute", "", 35, 45),
        ("idle", "launch", 45, 50),
        ("idle", "python", 50, 55),        # aten::linear is done: Python runs between ops
        ("memcpy", "", 55, 58),
        ("idle", "synchronization", 58, 80),  # drained while the host waited in the sync
        ("compute", "", 80, 85),
        ("idle", "python", 85, 100),
    ]
    (s,) = step_breakdown(store)
    # Preparing runs to the first device work at 35 us, over two causes (data loading, then launch).
    assert s.preparing_ns == 35 * US and s.idle_synchronization_ns == 22 * US and s.idle_data_loading_ns == 30 * US
    assert s.computing_ns + s.communication_not_overlapped_ns + s.preparing_ns + s.free_ns == s.dur_ns
    assert sum(getattr(s, f) for f in ("data_loading_ns", "forward_ns", "backward_ns", "optimizer_ns",
                                       "host_communication_ns", "gc_ns", "python_ns", "other_ns")) == s.dur_ns


def test_gc_pauses_modules_and_ranges_from_mlprofs_own_files(tmp_path):
    # Level_none: no Kineto trace, only mlprof's files. Module calls are forward; a GC
    # pause is GC even inside a module call; an mstx range named optimizer is the optimizer.
    t0 = BASE_NS
    capture = make_capture(tmp_path / "cap", {0: {
        "steps": [{"step": 3, "start_ns": t0, "end_ns": t0 + 100 * US}],
        "gc": [{"start_ns": t0 + 20 * US, "dur_ns": 5 * US, "generation": 2, "collected": 1, "uncollectable": 0,
                "tid": 42}],
        "markers": {"marks": [], "ranges": [{"id": 1, "name": "optimizer step", "start_ns": t0 + 60 * US,
                                             "end_ns": t0 + 80 * US, "tid": 42}]},
        "modules": {"modules": [["Net", "Net"], ["Net.fc", "Linear"]],
                    "calls": [[0, t0 + 10 * US, t0 + 50 * US, 42], [1, t0 + 15 * US, t0 + 30 * US, 42]]},
        "python_samples": {"interval_ns": 5 * US, "tid": 42, "frames": [["/home/u/train.py", 7, "main"]],
                           "stacks": [[0]], "samples": [[t0 + 1 * US, 0]]},
    }})
    result = parse_path(capture, ParseOptions())[0]
    store = TableStore(result.tables_dir)
    assert step_phases(store) == {"python": 40, "forward": 35, "gc": 5, "optimizer": 20}
    assert store.rows("SELECT module_path, depth, dur_ns FROM module_calls ORDER BY start_ns") == [
        ("Net", 0, 40 * US), ("Net.fc", 1, 15 * US)]
    assert store.rows("SELECT call_site FROM python_stacks") == [("/home/u/train.py:7 main",)]


def _all_real_traces() -> list:
    return sorted(p for p in SHARED_TRACES.rglob("*") if p.is_file() and p.name.endswith((".json", ".json.gz"))) + [
        H200_TRACE]


@pytest.mark.parametrize("trace", _all_real_traces(), ids=lambda p: p.parent.name + "/" + p.name[:24])
def test_phases_sum_to_every_step_of_every_real_trace(trace, tmp_path):
    store, _ = parse_one(trace, tmp_path / "out")
    bad = store.rows("""
        SELECT p.window_index, p.step, p.view, sum(p.dur_ns), any_value(s.dur_ns)
        FROM phase_spans p JOIN steps s ON s.window_index = p.window_index AND s.step = p.step
        GROUP BY p.window_index, p.step, p.view HAVING sum(p.dur_ns) <> any_value(s.dur_ns)""")
    assert bad == []
    # Every step is attributed, in the host view and (with device work) in the device view.
    steps = store.rows("SELECT count(*) FROM steps WHERE dur_ns > 0")[0][0]
    assert store.rows("SELECT count(DISTINCT (window_index, step)) FROM phase_spans WHERE view = 'host' "
                      "AND step IS NOT NULL")[0][0] == steps
    overlaps = store.rows("""
        SELECT count(*) FROM (SELECT view, step, start_ns, lag(end_ns) OVER (PARTITION BY window_index, step, view
                              ORDER BY start_ns) AS prev_end FROM phase_spans) WHERE prev_end <> start_ns""")[0][0]
    assert overlaps == 0, "spans of a step must be contiguous, without gaps or overlaps"


def _capture_with_modules_and_samples(tmp_path):
    t0 = BASE_NS
    us = lambda v: t0 + int(v * US)  # noqa: E731
    events = [
        X("ProfilerStep#2", 0.0, 100.0, cat="user_annotation", tid=42),
        X("aten::linear", 16.0, 10.0, tid=42, **{"Sequence number": 5}),
        X("aten::addmm", 17.0, 8.0, tid=42, **{"Sequence number": 5, "External id": 3}),
        X("cudaLaunchKernel", 18.0, 2.0, cat="cuda_runtime", tid=42, correlation=9, **{"External id": 3}),
        X("gemm", 30.0, 10.0, cat="kernel", pid=0, tid=7, device=0, stream=7, correlation=9),
        X("aten::relu", 35.0, 5.0, tid=42, **{"Sequence number": 6}),
        X("autograd::engine::evaluate_function: ReluBackward0", 55.0, 5.0, tid=42, **{"Sequence number": 6}),
        X("autograd::engine::evaluate_function: AddmmBackward0", 60.0, 20.0, tid=42, **{"Sequence number": 5}),
    ]
    frames = [["/home/u/train.py", 30, "main"], ["/home/u/train.py", 12, "step"],
              ["/usr/lib/python3.11/site-packages/torch/serialization.py", 600, "save"],
              ["/home/u/model.py", 8, "forward"]]
    capture = make_capture(tmp_path / "cap", {0: {
        "events": events,
        "modules": {"modules": [["Net", "Net"], ["Net.fc", "Linear"], ["Net.act", "ReLU"]],
                    "calls": [[0, us(10), us(50), 42], [1, us(15), us(30), 42], [2, us(34), us(41), 42]]},
        # Python outside ops [0,16) and [80,100): samples in torch.save called from train.py:12;
        # forward: samples at model.py:8.
        "python_samples": {"interval_ns": 2 * US, "tid": 42, "frames": frames, "stacks": [[0, 1, 2], [0, 1, 3]],
                           "samples": [[us(2), 0], [us(4), 0], [us(6), 0], [us(12), 1], [us(20), 1],
                                       [us(85), 0], [us(90), 0], [us(95), 0]]},
    }})
    result = parse_path(capture, ParseOptions())[0]
    return TableStore(result.tables_dir)


def test_module_tree_charges_device_and_backward_time_to_the_module_that_ran_the_forward(tmp_path):
    from mlprof.analysis.modules import module_tree

    store = _capture_with_modules_and_samples(tmp_path)
    tree = {m.path: m for m in module_tree(store)}
    assert list(tree) == ["Net", "Net.fc", "Net.act"]
    fc, act, net = tree["Net.fc"], tree["Net.act"], tree["Net"]
    assert (fc.calls, fc.total_ns, fc.self_ns) == (1, 15 * US, 15 * US)
    assert (net.total_ns, net.self_ns) == (40 * US, 40 * US - 15 * US - 7 * US)
    # gemm was launched by aten::addmm inside Net.fc; AddmmBackward0 belongs to Net.fc's addmm (seq 5).
    assert (fc.device_self_ns, fc.backward_self_ns) == (10 * US, 20 * US)
    assert (act.device_self_ns, act.backward_self_ns) == (0, 5 * US)
    assert (net.device_self_ns, net.device_total_ns, net.backward_total_ns) == (0, 10 * US, 25 * US)


def test_call_sites_fold_library_frames_into_the_users_line(tmp_path):
    from mlprof.analysis.call_sites import call_sites

    store = _capture_with_modules_and_samples(tmp_path)
    python = call_sites(store, phase="python")
    assert python[0]["call_site"] == "/home/u/train.py:12 step"  # torch.save's caller, not serialization.py
    assert python[0]["leaf"].endswith("serialization.py:600 save")
    assert python[0]["share_of_phase"] == 1.0
    forward = call_sites(store, phase="forward")
    assert [r["call_site"] for r in forward] == ["/home/u/model.py:8 forward"]
    by_phase = {r["phase"]: r["est_ns"] for r in call_sites(store)}
    phases = step_phases(store)
    assert by_phase["python"] == phases["python"] * US and by_phase["forward"] == phases["forward"] * US


def test_gaps_between_backward_nodes_are_the_engines_work(tmp_path):
    store = parsed(tmp_path, [
        X("ProfilerStep#1", 0.0, 100.0, cat="user_annotation"),
        X("aten::linear", 0.0, 20.0),
        X("autograd::engine::evaluate_function: AddmmBackward0", 30.0, 10.0),
        X("autograd::engine::evaluate_function: ReluBackward0", 45.0, 10.0),
        X("autograd::engine::evaluate_function: AddmmBackward0", 60.0, 10.0),
        X("Optimizer.step#SGD.step", 80.0, 10.0, cat="user_annotation"),
    ])
    # [20,30) before the first node and [70,80) after the last are Python; [40,45) and [55,60) the engine.
    assert step_phases(store) == {"forward": 20, "python": 30, "backward": 40, "optimizer": 10}


def test_step_host_load_joins_each_step_with_the_samples_covering_it(tmp_path):
    import json

    from mlprof.analysis.host import step_host_load

    t0 = BASE_NS
    ms = 1_000_000
    capture = make_capture(tmp_path / "cap", {0: {"steps": [
        {"step": 1, "start_ns": t0 + 5 * ms, "end_ns": t0 + 25 * ms},
        {"step": 2, "start_ns": t0 + 25 * ms, "end_ns": t0 + 45 * ms}]}})
    # Samples every 20 ms; the one at 40 ms measures (20, 40] and sees a busy neighbour.
    samples = [{"ts_ns": t0 + k * 20 * ms, "cpu_percent": 50.0 + 50 * (k == 2), "job_cpu_percent": 100.0 - 70 * (k == 2),
                "cpu_count": 2, "runnable_threads": 1 + 3 * (k == 2), "job_threads": 5,
                "top_processes": [{"pid": 77, "name": "stress", "cpu_percent": 190.0 * (k == 2)}]}
               for k in range(4)]
    (capture / "host_samples.json").write_text(json.dumps(samples))
    store = TableStore(parse_path(capture, ParseOptions())[0].tables_dir)
    rows = {r["step"]: r for r in step_host_load(store)}
    # Step 1 [5, 25) overlaps the samples at 20 ((0, 20]) and 40 ((20, 40]); step 2 [25, 45) those at 40 and 60.
    assert rows[1]["samples"] == 2 and rows[2]["samples"] == 2
    assert rows[1]["cpu_count"] == 2 and rows[1]["job_cpu_percent"] == pytest.approx(65.0)
    assert rows[2]["runnable_threads"] == pytest.approx(2.5)
    assert rows[2]["top_processes"][0]["name"] == "stress" and rows[2]["top_processes"][0]["pid"] == 77


@pytest.mark.parametrize("trace", [H200_TRACE, SHARED_TRACES / "ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",
                                   SHARED_TRACES / "nccl_parser_config/nccl_data.json.gz"],
                         ids=lambda p: p.name[:16])
def test_steps_attributed_one_chunk_at_a_time_give_the_same_phases(tmp_path, monkeypatch, trace):
    """The attribution loads its spans a group of steps at a time (a budgeted number of spans); here
    every step is its own group, and the phases are those of one group for all."""
    from mlprof.parse import attribution

    whole, _ = parse_one(trace, tmp_path / "whole")
    monkeypatch.setattr(attribution, "_BYTES_PER_SPAN", 2**50)  # one step a chunk
    chunks = []
    step_chunks = attribution._step_chunks
    monkeypatch.setattr(attribution, "_step_chunks", lambda *a: chunks.append(step_chunks(*a)) or chunks[-1])
    chunked, _ = parse_one(trace, tmp_path / "chunked")
    assert max(len(c) for c in chunks) > 1
    query = "SELECT * FROM phase_spans ORDER BY ALL"
    assert whole.rows(query) == chunked.rows(query) and whole.count("phase_spans") > 0
    assert len(whole.rows("SELECT * FROM steps")) > 1


def test_a_comprehensions_samples_are_the_function_that_holds_it():
    # Python 3.11 gives a list comprehension (and a generator expression) a frame of its own; 3.12+ inlines
    # it: either way its time is the enclosing function's, at the comprehension's line.
    from mlprof.parse.capture_files import PythonSamplesFile
    from mlprof.parse.python_and_modules import python_tables

    frames = [["/home/u/train.py", 30, "main"], ["/home/u/train.py", 12, "metrics"],
              ["/home/u/train.py", 13, "<listcomp>"], ["/home/u/train.py", 14, "<genexpr>"],
              ["/usr/lib/python3.11/statistics.py", 200, "mean"], ["/home/u/other.py", 3, "<listcomp>"]]
    data = PythonSamplesFile(interval_ns=1000, tid=1, frames=frames, dropped=0, waited=0,
                             stacks=[[0, 1, 2], [0, 1, 2, 3], [0, 1, 3, 4], [0, 5]],
                             samples=[[10, 0], [20, 1], [30, 2], [40, 3]])
    stacks = python_tables(data, "t", lambda ts: np.zeros(len(ts), dtype=np.int64))["python_stacks"]
    assert list(stacks["call_site"]) == ["/home/u/train.py:13 metrics", "/home/u/train.py:14 metrics",
                                         "/home/u/train.py:14 metrics", "/home/u/other.py:3 <listcomp>"]
    assert list(stacks["leaf"])[2].endswith("statistics.py:200 mean")  # the leaf stays the real frame
    # The stack reads as on Python 3.12: the comprehension's line in the function, no frame of its own.
    assert json.loads(stacks["frames"][0]) == ["/home/u/train.py:30 main", "/home/u/train.py:13 metrics"]
