"""Fixtures of the dashboard tests: a logdir with parsed runs made by the real parser.

The trace is written here (a few steps of a training loop on one GPU: nested
CPU ops with input shapes, launches, kernels on two streams, flows, allocator
events), then ``parse_path`` turns it into tables, as ``mlprof parse`` does.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mlprof.parse import parse_path

BASE_US = 1_700_000_000_000_000  # µs, a 2023 wall-clock time
STEPS = 3
OPS_PER_STEP = 6
OP_NAMES = ["aten::conv2d", "aten::relu", "aten::addmm"]
KERNELS = {"aten::conv2d": "implicit_gemm_conv", "aten::relu": "elementwise_relu", "aten::addmm": "sgemm_128x64"}
PID, TID = 777, 777
PY_FRAMES_PER_STEP = 2
SLOW_RELU_US = 90  # relu's host time in the slower run (30 µs in the other)


def make_trace(op_dur_us: dict[str, int] | None = None, rank: int | None = None, kernel_extra_us: int = 0) -> dict:
    """The trace; ``op_dur_us`` makes some ops longer on the host (a slower run to compare),
    ``rank`` records distributedInfo, ``kernel_extra_us`` lengthens every kernel (a slow rank)."""
    op_dur_us = op_dur_us or {}
    events: list[dict] = [
        {"ph": "M", "name": "process_name", "pid": PID, "tid": 0, "args": {"name": "python"}},
        {"ph": "M", "name": "thread_name", "pid": PID, "tid": TID, "args": {"name": "main thread"}},
    ]
    ts = BASE_US
    events.append({"ph": "i", "s": "g", "name": "Iteration Start: PyTorch Profiler", "pid": PID, "tid": TID,
                   "ts": BASE_US})
    corr = 0
    for step in range(STEPS):
        step_start = ts
        events.append({"ph": "X", "cat": "user_annotation", "name": "enumerate(DataLoader)#_Iter.__next__",
                       "pid": PID, "tid": TID, "ts": ts + 1, "dur": 40 + 10 * step, "args": {}})
        ts += 50 + 10 * step
        for i in range(OPS_PER_STEP):
            name = OP_NAMES[i % len(OP_NAMES)]
            corr += 1
            dims = [[8, 3, 32, 32], [16, 3, 3, 3]] if name == "aten::conv2d" and i % 2 else [[4, 64]]
            dur = op_dur_us.get(name, 30)
            events.append({"ph": "X", "cat": "cpu_op", "name": name, "pid": PID, "tid": TID, "ts": ts, "dur": dur,
                           "args": {"External id": corr, "Input Dims": dims, "Input type": ["float"] * len(dims)}})
            events.append({"ph": "X", "cat": "cpu_op", "name": "aten::empty", "pid": PID, "tid": TID, "ts": ts + 2,
                           "dur": 3, "args": {"External id": corr}})
            events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": PID, "tid": TID,
                           "ts": ts + 10, "dur": 8, "args": {"External id": corr, "correlation": corr}})
            stream = 7 if i % 3 else 13
            events.append({"ph": "X", "cat": "kernel", "name": KERNELS[name], "pid": 0, "tid": stream,
                           "ts": ts + 20, "dur": 15 + i + kernel_extra_us, "args": {"External id": corr, "correlation": corr,
                                                                   "device": 0, "stream": stream,
                                                                   "grid": [64, 1, 1], "block": [128, 1, 1]}})
            events.append({"ph": "s", "id": corr, "pid": PID, "tid": TID, "ts": ts + 10, "cat": "ac2g",
                           "name": "ac2g"})
            events.append({"ph": "f", "id": corr, "pid": 0, "tid": stream, "ts": ts + 20, "cat": "ac2g",
                           "name": "ac2g", "bp": "e"})
            events.append({"ph": "i", "s": "t", "name": "[memory]", "pid": PID, "tid": TID, "ts": ts + 3,
                           "args": {"Device Type": 1, "Device Id": 0, "Addr": 1000 + corr, "Bytes": 4096 * (i + 1),
                                    "Total Allocated": 4096 * (corr + 1), "Total Reserved": 1 << 20}})
            ts += dur + 10
        # Python frames (with_stack=True): nested by time only, on their own track.
        events.append({"ph": "X", "cat": "python_function", "name": "train.py(20): train_step", "pid": PID,
                       "tid": TID, "ts": step_start + 50, "dur": ts - step_start - 55, "args": {}})
        events.append({"ph": "X", "cat": "python_function", "name": "torch/nn/modules/module.py(1): _call_impl",
                       "pid": PID, "tid": TID, "ts": step_start + 60, "dur": 40, "args": {}})
        events.append({"ph": "C", "name": "cpu_util", "pid": PID, "ts": step_start, "args": {"user": 10.0 + step}})
        # What mlprof's host sampler leaves (host_* counters).
        events.append({"ph": "C", "name": "host_cpu", "pid": PID, "ts": step_start + 5,
                       "args": {"system_percent": 50.0 + step, "job_percent": 40.0 + step}})
        events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step}", "pid": PID, "tid": TID,
                       "ts": step_start, "dur": ts - step_start + 30, "args": {}})
        ts += 60
    trace = {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "Fake GPU"}], "traceEvents": events}
    if rank is not None:
        trace["distributedInfo"] = {"backend": "nccl", "rank": rank, "world_size": 2}
    return trace


@pytest.fixture(scope="session")
def logdir(tmp_path_factory) -> Path:
    """A logdir with two parsed GPU-like trace runs (the second with slower relu ops) and one unparsed trace."""
    root = tmp_path_factory.mktemp("ui_logdir")
    (root / "jobs").mkdir()
    for name, durations in (("train", None), ("train_slow", {"aten::relu": SLOW_RELU_US})):
        trace = root / "jobs" / f"{name}.pt.trace.json"
        trace.write_text(json.dumps(make_trace(durations)))
        parse_path(trace)
    (root / "later.pt.trace.json").write_text(json.dumps({"traceEvents": []}))
    return root


@pytest.fixture(scope="session")
def run_id() -> str:
    return "jobs/train_mlprof_output"


@pytest.fixture(scope="session")
def slow_run_id() -> str:
    return "jobs/train_slow_mlprof_output"


def api_get(client, path, **params):
    """GET an API path through a TestClient: the JSON of a 200 answer (else the test fails with its text)."""
    r = client.get(path, params=params)
    assert r.status_code == 200, r.text
    return r.json()
