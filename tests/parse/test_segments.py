"""A trace built a stretch of time at a time (its decoded pieces on disk) gives the very tables of one built
whole: every table, row for row, and the same parse_info.json.

The segmented parse is forced on small traces with ``MLPROF_SEGMENT_EVENTS``
(events a stretch may hold); a trace too large for its budget takes it on its
own (``wants_spill``).
"""

from __future__ import annotations

import json
import os

import pytest

from mlprof.errors import MlprofError
from mlprof.parse import ParseOptions, parse_path, segments, spill
from mlprof.parse.kineto import StringPool, read_kineto
from mlprof.parse.segments import SEGMENT_EVENTS_ENV, plan_segments, wants_spill
from mlprof.parse.spill import Spill, SpilledTrace
from mlprof.tables.schema import TABLES
from mlprof.tables.store import TableStore

from shared_data import SHARED_TRACES

from .conftest import write_trace
from .test_golden import X

TID, SIDE = 11, 12


def _memory(ts: float, size: int, addr: int) -> dict:
    return {"ph": "i", "s": "t", "name": "[memory]", "pid": 10, "tid": TID, "ts": ts, "cat": "cpu_instant_event",
            "args": {"Total Reserved": 8192, "Total Allocated": 4096 + size, "Bytes": size, "Addr": addr,
                     "Device Type": 0, "Device Id": -1}}


def _training_trace(path, steps: int = 30, crossing: tuple[int, ...] = (4, 5, 11)):
    """Steps of nested ops (a same-name child folded into its parent, a zero-length op, Python frames,
    a backward node and an optimizer step), allocations, runtime calls without kernels, forward-backward
    flows, instants and counters; an op on a side thread crosses the starts of the ``crossing`` steps."""
    events = [{"ph": "M", "name": "process_name", "pid": 10, "tid": 0, "args": {"name": "python"}},
              {"ph": "M", "name": "thread_name", "pid": 10, "tid": TID, "args": {"name": "main"}}]
    for i in range(steps):
        t = 1000.0 + i * 100
        events += [
            X(f"ProfilerStep#{i}", t, 95.0, cat="user_annotation", tid=TID),
            X("aten::linear", t + 1, 20.0, tid=TID, **{"Input Dims": [[4, 16 + i % 3], [16, 16]],
                                                        "Input type": ["float"], "Sequence number": i}),
            X("aten::addmm", t + 2, 10.0, tid=TID),
            X("aten::addmm", t + 2, 10.0, tid=TID),
            X("aten::view", t + 13, 0.0, tid=TID),
            X("train.py(42): forward", t + 1, 25.0, cat="python_function", tid=TID),
            X("cudaStreamSynchronize", t + 14, 1.0, cat="cuda_runtime", tid=TID, correlation=i),
            X("autograd::engine::evaluate_function: AddmmBackward0", t + 30, 25.0, tid=TID),
            X("aten::mm", t + 31, 8.0, tid=TID),
            X("Optimizer.step#SGD.step", t + 60, 20.0, cat="user_annotation", tid=TID),
            X("aten::add_", t + 61, 5.0, tid=TID),
            X("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", t + 82, 6.0, tid=SIDE),
            _memory(t + 3, 512, 7000 + i), _memory(t + 40, -512, 7000 + i),
            {"ph": "s", "id": 900 + i, "pid": 10, "tid": TID, "ts": t + 2, "cat": "fwdbwd", "name": "fwdbwd"},
            {"ph": "f", "id": 900 + i, "pid": 10, "tid": TID, "ts": t + 30, "cat": "fwdbwd", "name": "fwdbwd",
             "bp": "e"},
            {"ph": "C", "name": "host memory", "pid": 10, "ts": t + 50, "args": {"used": 100 + i}},
        ]
        if i in crossing:  # from inside step i - 1 to inside step i, with a child after it: no cut there
            events += [X("pin_memory_loop", t - 10, 20.0, tid=SIDE), X("aten::copy_", t + 2, 3.0, tid=SIDE)]
    events.append({"ph": "i", "s": "g", "name": "checkpoint", "pid": 10, "tid": TID, "ts": 1500.0})
    # Kineto writes events per kind, not in time order: shuffle kinds apart like it does.
    events.sort(key=lambda e: (e.get("cat") == "fwdbwd", e.get("ph") == "i"))
    return write_trace(path, events)


def _parse(path, out, monkeypatch, events: int | None, jobs_env: str | None = None) -> dict:
    if events is None:
        monkeypatch.delenv(SEGMENT_EVENTS_ENV, raising=False)
    else:
        monkeypatch.setenv(SEGMENT_EVENTS_ENV, str(events))
    stages = []
    result = parse_path(path, ParseOptions(output_dir=out, on_stage=stages.append))[0]
    with TableStore(result.tables_dir) as store:
        tables = {name: store.rows(f'SELECT * FROM "{name}"') for name in TABLES}
    info = json.loads((out / "parse_info.json").read_text())
    for key in ("parse_seconds", "output_dir"):
        info.pop(key)
    return {"tables": tables, "info": info, "stages": stages, "files": sorted(p.name for p in out.iterdir())}


@pytest.mark.parametrize("name", ["t.pt.trace.json", "t.pt.trace.json.gz"])
@pytest.mark.parametrize("events", [1, 40, 400])
def test_a_trace_built_in_stretches_gives_the_tables_of_one_built_whole(tmp_path, monkeypatch, name, events):
    trace = _training_trace(tmp_path / name)
    whole = _parse(trace, tmp_path / "whole", monkeypatch, None)
    segmented = _parse(trace, tmp_path / "segmented", monkeypatch, events)
    assert segmented["tables"] == whole["tables"]
    assert segmented["info"] == whole["info"]
    stretches = [s for s in segmented["stages"] if "stretch" in s]
    assert stretches and stretches[-1].endswith(f"of {len(stretches)}")
    if events < 400:
        assert len(stretches) > 1
    # Nothing of the spill or the parts is left.
    assert segmented["files"] == whole["files"] == [".lock", "parse_info.json", "tables"]
    assert sorted(p.name for p in (tmp_path / "segmented" / "tables").iterdir()) == \
        sorted(p.name for p in (tmp_path / "whole" / "tables").iterdir())


def test_no_cut_falls_inside_an_op(tmp_path, monkeypatch):
    monkeypatch.setenv(SEGMENT_EVENTS_ENV, "1")
    trace = _training_trace(tmp_path / "t.json", crossing=(4, 5, 11))
    pool = StringPool()
    spilled = read_kineto(trace, pool, spill=Spill(tmp_path / "spill"))
    assert isinstance(spilled, SpilledTrace)
    plan = plan_segments(spilled, pool, None)
    starts = [1000_000 + i * 100_000 for i in range(30)]  # ns after the base
    base = spilled.cols.base_time_ns
    cut_steps = {starts.index(c - base) for c in plan.cuts}
    # Every step start but the first (nothing before it to cut off) and the crossed ones.
    assert cut_steps == set(range(1, 30)) - {4, 5, 11}


def test_traces_with_device_work_or_no_cut_are_built_whole(tmp_path, monkeypatch):
    # GPU work (kernels meet their launches across the trace), and a trace of one step.
    for k, trace in enumerate([SHARED_TRACES / "nccl_parser_config/nccl_data.json.gz",
                               _training_trace(tmp_path / "one.json", steps=1, crossing=())]):
        whole = _parse(trace, tmp_path / f"w{k}", monkeypatch, None)
        segmented = _parse(trace, tmp_path / f"s{k}", monkeypatch, 10)
        assert segmented["tables"] == whole["tables"] and segmented["info"] == whole["info"]
        assert not [s for s in segmented["stages"] if "stretch" in s]
        assert segmented["files"] == [".lock", "parse_info.json", "tables"]


@pytest.mark.parametrize("where", ["spill", "stack"])
def test_a_full_disk_is_named_and_leaves_no_spill_and_no_tables(tmp_path, monkeypatch, where):
    trace = _training_trace(tmp_path / "t.json")
    monkeypatch.setenv(SEGMENT_EVENTS_ENV, "40")
    monkeypatch.setenv("MLPROF_PARSE_WORKERS", "2")  # a forked worker spills too

    def fail(*args, **kwargs):
        raise OSError(28, "No space left on device")

    if where == "spill":
        monkeypatch.setattr(spill.np, "save", fail)
    else:
        monkeypatch.setattr(segments, "stack_parts", fail)
    with pytest.raises(MlprofError, match="cannot write: No space left on device"):
        parse_path(trace, ParseOptions(output_dir=tmp_path / "out"))
    assert not (tmp_path / "out").exists() or [p.name for p in (tmp_path / "out").iterdir()] == [".lock"]


def test_only_a_trace_too_large_for_its_budget_is_spilled(tmp_path, monkeypatch):
    monkeypatch.delenv(SEGMENT_EVENTS_ENV, raising=False)
    big = tmp_path / "big.json"
    with open(big, "wb") as fh:  # sparse: 3 GiB of size, no disk
        fh.truncate(3 * 2**30)
    assert wants_spill(big, 2**30)
    assert not wants_spill(big, 8 * 2**30)
    small = _training_trace(tmp_path / "small.json")
    assert not wants_spill(small, None)
    assert os.path.getsize(small) < 2**20
