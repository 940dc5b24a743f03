"""A trace built a stretch of time at a time (its decoded pieces on disk) gives the very tables of one built
whole: every table, row for row, and the same parse_info.json.

The segmented parse is forced on small traces with ``MLPROF_SEGMENT_EVENTS``
(events a stretch may hold); a trace too large for its budget takes it on its
own (``wants_spill``).
"""

from __future__ import annotations

import json
import os
import random

import pytest

from mlprof.errors import MlprofError
from mlprof.parse import ParseOptions, kineto_ranges, kineto_stream, parse_path, segment_joins, segments, spill, trace_blocks
from mlprof.parse.kineto import StringPool, read_kineto
from mlprof.parse.segments import SEGMENT_EVENTS_ENV, plan_segments, wants_spill
from mlprof.parse.spill import Spill, SpilledTrace
from mlprof.tables.schema import TABLES
from mlprof.tables.store import TableStore

from shared_data import H200_TRACE, SHARED_TRACES

from .conftest import BASE_NS, make_capture, write_trace
from .test_golden import X

TID, SIDE = 11, 12


def _memory(ts: float, size: int, addr: int) -> dict:
    return {"ph": "i", "s": "t", "name": "[memory]", "pid": 10, "tid": TID, "ts": ts, "cat": "cpu_instant_event",
            "args": {"Total Reserved": 8192, "Total Allocated": 4096 + size, "Bytes": size, "Addr": addr,
                     "Device Type": 0, "Device Id": -1}}


def _training_trace(path, steps: int = 30, crossing: tuple[int, ...] = (4, 5, 11)):
    return write_trace(path, _training_events(steps, crossing))


def _training_events(steps: int = 30, crossing: tuple[int, ...] = (4, 5, 11)) -> list[dict]:
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
    return events


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
    assert segmented["files"] == whole["files"] == ["parse_info.json", "tables"]
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


def _gpu_trace(path, steps: int = 24):
    return write_trace(path, _gpu_events(steps))


def _gpu_events(steps: int = 24) -> list[dict]:
    """Steps whose ops launch kernels (two run after the next step has begun), a collective launched by
    a communication op, a kernel named as a collective by Kineto, a kernel with no launch record, a
    runtime call reusing an earlier correlation id, a memcpy, and ac2g flows: clean ones, a start
    written twice, an end without a start, flow steps."""
    events = [{"ph": "M", "name": "process_name", "pid": 10, "tid": 0, "args": {"name": "python"}},
              {"ph": "M", "name": "thread_name", "pid": 10, "tid": TID, "args": {"name": "main"}}]

    def launch(name, ts, corr):
        return [X(name, ts, 1.0, cat="cuda_runtime", tid=TID, correlation=corr, External_id=corr),
                {"ph": "s", "id": corr, "pid": 10, "tid": TID, "ts": ts, "cat": "ac2g", "name": "ac2g"}]

    def kernel(name, ts, corr, cat="kernel", **args):
        return [X(name, ts, 3.0, cat=cat, pid=0, tid=7, device=0, stream=7, correlation=corr, **args),
                {"ph": "f", "id": corr, "pid": 0, "tid": 7, "ts": ts, "cat": "ac2g", "name": "ac2g", "bp": "e"}]

    for i in range(steps):
        t, c = 1000.0 + i * 100, 10 * (i + 1)
        events += [X(f"ProfilerStep#{i}", t, 95.0, cat="user_annotation", tid=TID),
                   X("aten::linear", t + 1, 20.0, tid=TID), X("aten::addmm", t + 2, 10.0, tid=TID),
                   *launch("cudaLaunchKernel", t + 3, c), *kernel("sgemm_128x64", t + 6, c),
                   X("nccl:all_reduce", t + 40, 10.0, cat="user_annotation", tid=TID),
                   *launch("cudaLaunchKernel", t + 41, c + 1),
                   *kernel("ncclDevKernel_SendRecv(ncclDevComm*)", t + 45, c + 1, In_msg_nelems=1024, dtype="Float"),
                   X("aten::copy_", t + 60, 8.0, tid=TID), *launch("cudaMemcpyAsync", t + 61, c + 2),
                   *kernel("Memcpy HtoD (Pageable -> Device)", t + 63, c + 2, cat="gpu_memcpy", bytes=4096),
                   # Launched at the end of step i, run in step i + 1's time: the kernel is step i's.
                   X("aten::relu", t + 89, 4.0, tid=TID), *launch("cudaLaunchKernel", t + 90, c + 3),
                   *kernel("relu_kernel", t + 102, c + 3),
                   X("unlaunched_kernel", t + 50, 2.0, cat="kernel", pid=0, tid=8, device=0, stream=8,
                     correlation=10**6 + i)]
        if i % 3 == 0:
            events += [*launch("cudaLaunchKernel", t + 70, c + 4),
                       *kernel("ncclKernel_AllReduce_RING_LL_Sum_float", t + 104, c + 4,
                               Collective_name="allreduce", In_msg_nelems=256, dtype="Half", Group_size=2)]
        if i % 5 == 4:  # the same correlation id as step 0's launch: the first runtime call keeps it
            events += [X("cudaLaunchKernel", t + 80, 1.0, cat="cuda_runtime", tid=TID, correlation=10)]
        if i % 7 == 3:  # a flow start written twice, an end with no start, a flow step
            events += [{"ph": "s", "id": c + 3, "pid": 10, "tid": TID, "ts": t + 88, "cat": "ac2g", "name": "ac2g"},
                       {"ph": "f", "id": 5000 + i, "pid": 0, "tid": 7, "ts": t + 9, "cat": "ac2g", "name": "ac2g"},
                       {"ph": "t", "id": c, "pid": 10, "tid": TID, "ts": t + 4, "cat": "ac2g", "name": "ac2g"}]
    # Kineto writes events per kind, not in time order.
    events.sort(key=lambda e: (e.get("pid") == 0, e.get("cat") == "ac2g", e.get("ph") == "f"))
    return events


@pytest.fixture()
def small_pieces(monkeypatch):
    """Decoded pieces of about 2 KB: many pieces, so device ops and flows come in many chunks."""
    monkeypatch.setattr(kineto_ranges, "_PIECE_BYTES", 2000)
    monkeypatch.setattr(kineto_stream, "_LOCAL_PIECE_BYTES", 2000)


@pytest.mark.parametrize("name", ["g.pt.trace.json", "g.pt.trace.json.gz"])
@pytest.mark.parametrize("events", [1, 60])
def test_a_gpu_trace_built_in_stretches_gives_the_tables_of_one_built_whole(tmp_path, monkeypatch, small_pieces,
                                                                            name, events):
    trace = _gpu_trace(tmp_path / name)
    whole = _parse(trace, tmp_path / "whole", monkeypatch, None)
    segmented = _parse(trace, tmp_path / "segmented", monkeypatch, events)
    assert segmented["tables"] == whole["tables"]
    assert segmented["info"] == whole["info"]
    assert len([s for s in segmented["stages"] if "stretch" in s]) > 1
    assert "building tables: device ops" in segmented["stages"]
    assert segmented["files"] == whole["files"] == ["parse_info.json", "tables"]
    # The cases are there: kernels joined to their launches' ops and steps, named collectives, paired flows.
    with TableStore(tmp_path / "segmented" / "tables") as store:
        for table in ("device_ops", "collectives"):
            late = store.rows(f"SELECT d.step, s.step FROM {table} d JOIN steps s ON d.start_ns >= s.start_ns "
                              "AND d.start_ns < s.end_ns WHERE d.name IN ('relu_kernel', "
                              "'ncclKernel_AllReduce_RING_LL_Sum_float')")
            assert late and all(launched == ran - 1 for launched, ran in late)
        assert store.rows("SELECT count(*) FROM device_ops WHERE host_op_id IS NOT NULL")[0][0] >= 24 * 4
        names = dict(store.rows("SELECT collective_name, count(*) FROM collectives GROUP BY ALL"))
        assert names == {"nccl:all_reduce": 24, "allreduce": 8}
        assert store.rows("SELECT count(*) FROM flows WHERE category = 'ac2g'")[0][0] >= 24 * 4


@pytest.mark.parametrize("seed", range(6))
def test_flows_are_paired_as_the_whole_build_pairs_them(tmp_path, monkeypatch, small_pieces, seed):
    """Random flow events (starts, ends and steps of a few ids, in random order; seed 0: every id one
    start and one end, the whole build's fast pairing) in a trace cut at every step."""
    rng = random.Random(seed)
    events = [X(f"ProfilerStep#{i}", 1000.0 + i * 100, 95.0, cat="user_annotation", tid=TID) for i in range(20)]
    if seed == 0:
        ids = list(range(300))
        flows = [(ph, i) for i in ids for ph in rng.sample("sf", 2)]
        rng.shuffle(flows)
    else:
        flows = [(rng.choice("sfffsst"), rng.randrange(40)) for _ in range(400)]
    for n, (ph, flow_id) in enumerate(flows):
        events.append({"ph": ph, "id": flow_id, "pid": 10, "tid": TID + n % 3, "ts": 1000.0 + n * 5,
                       "cat": ["ac2g", "fwdbwd"][flow_id % 2 if seed == 0 else rng.randrange(2)], "name": "flow"})
    trace = write_trace(tmp_path / "flows.json", events)
    whole = _parse(trace, tmp_path / "whole", monkeypatch, None)
    segmented = _parse(trace, tmp_path / "segmented", monkeypatch, 1)
    assert segmented["tables"]["flows"] == whole["tables"]["flows"]
    assert len(whole["tables"]["flows"]) > (250 if seed == 0 else 20)
    assert segmented["tables"] == whole["tables"]


def _mlprof_files(steps: int) -> dict:
    """A window's own files: steps with CPU times, a GC pause, a marked range, module calls, Python samples."""
    def at(us: float) -> int:
        return BASE_NS + int(us * 1000)

    return {
        "steps": [{"step": i, "start_ns": at(1000 + i * 100), "end_ns": at(1095 + i * 100), "cpu_ns": 90_000 + i,
                   "cpu_wait_ns": 1_000} for i in range(steps)],
        "gc": [{"start_ns": at(1000 + i * 100 + 70), "dur_ns": 2_000, "generation": 2, "collected": 1,
                "uncollectable": 0, "tid": TID} for i in range(0, steps, 4)],
        "markers": {"marks": [{"name": "epoch", "ts_ns": at(1001), "tid": TID}],
                    "ranges": [{"id": 1, "name": "optimizer step", "start_ns": at(1160), "end_ns": at(1180),
                                "tid": TID}]},
        "modules": {"modules": [["Net", "Net"], ["Net.fc", "Linear"]],
                    "calls": [[0, at(1000 + i * 100 + 1), at(1000 + i * 100 + 30), TID] for i in range(steps)]},
        "python_samples": {"interval_ns": 5_000, "tid": TID, "frames": [["/home/u/train.py", 7, "main"]],
                           "stacks": [[0]], "samples": [[at(1000 + i * 50 + 3), 0] for i in range(2 * steps)]},
    }


@pytest.mark.parametrize("events", [1, 60])
def test_a_capture_window_built_in_stretches_gives_the_tables_of_one_built_whole(tmp_path, monkeypatch,
                                                                                 small_pieces, events):
    """Window 0: a GPU trace with its ProfilerStep spans; window 1: a CPU trace whose steps are only
    mlprof's own (its ProfilerStep spans removed); both with mlprof's files."""
    plain = [e for e in _training_events(24, crossing=(5,)) if not e.get("name", "").startswith("ProfilerStep#")]
    capture = make_capture(tmp_path / "cap", {0: {"events": _gpu_events(24), **_mlprof_files(24)},
                                              1: {"events": plain, **_mlprof_files(24)}})
    whole = _parse(capture, tmp_path / "whole", monkeypatch, None)
    segmented = _parse(capture, tmp_path / "segmented", monkeypatch, events)
    assert segmented["tables"] == whole["tables"]
    assert segmented["info"] == whole["info"]
    firsts = [s for s in segmented["stages"] if s.startswith("building tables: stretch 1 of")]
    assert len(firsts) == 2 and "building tables: stretch 1 of 1" not in firsts  # each window, in stretches
    assert "building tables: device ops" in segmented["stages"]
    counts = {name: len(rows) for name, rows in whole["tables"].items()}
    assert all(counts[name] for name in ("gc_pauses", "module_calls", "python_samples", "device_ops", "flows"))
    assert {row[0] for row in whole["tables"]["steps"]} == {0, 1}  # both windows have steps
    leftovers = [p.name for p in (tmp_path / "segmented").rglob(".tmp*")] + \
        [p.name for p in (tmp_path / "segmented").rglob(".parts")]
    assert leftovers == []


def test_a_trace_of_one_step_is_built_whole(tmp_path, monkeypatch):
    trace = _training_trace(tmp_path / "one.json", steps=1, crossing=())
    whole = _parse(trace, tmp_path / "w", monkeypatch, None)
    segmented = _parse(trace, tmp_path / "s", monkeypatch, 10)
    assert segmented["tables"] == whole["tables"] and segmented["info"] == whole["info"]
    assert not [s for s in segmented["stages"] if "stretch" in s]
    assert segmented["files"] == ["parse_info.json", "tables"]


@pytest.mark.parametrize("trace", [SHARED_TRACES / "nccl_parser_config/nccl_data.json.gz",
                                   SHARED_TRACES / "ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",
                                   H200_TRACE], ids=lambda p: p.name[:20])
def test_real_gpu_traces_built_in_stretches_give_the_tables_of_them_built_whole(tmp_path, monkeypatch, trace):
    monkeypatch.setattr(kineto_stream, "_LOCAL_PIECE_BYTES", 300_000)
    whole = _parse(trace, tmp_path / "w", monkeypatch, None)
    segmented = _parse(trace, tmp_path / "s", monkeypatch, 5000)
    assert segmented["tables"] == whole["tables"] and segmented["info"] == whole["info"]
    assert len([s for s in segmented["stages"] if "stretch" in s]) > 1


@pytest.mark.parametrize("where", ["spill", "stack", "launches", "device ops"])
def test_a_full_disk_is_named_and_leaves_no_spill_and_no_tables(tmp_path, monkeypatch, where):
    trace = _training_trace(tmp_path / "t.json") if where in ("spill", "stack") else _gpu_trace(tmp_path / "g.json")
    monkeypatch.setenv(SEGMENT_EVENTS_ENV, "40")
    monkeypatch.setenv("MLPROF_PARSE_WORKERS", "2")  # a forked worker spills too

    def fail(*args, **kwargs):
        raise OSError(28, "No space left on device")

    if where == "spill":
        monkeypatch.setattr(spill.np, "save", fail)
    elif where == "stack":
        monkeypatch.setattr(segments, "stack_parts", fail)
    elif where == "launches":
        monkeypatch.setattr(segment_joins, "write_columns", fail)
    else:
        monkeypatch.setattr(segment_joins, "stack_parts", fail)
    with pytest.raises(MlprofError, match="cannot write: No space left on device"):
        parse_path(trace, ParseOptions(output_dir=tmp_path / "out"))
    assert not (tmp_path / "out").exists() or [p.name for p in (tmp_path / "out").iterdir()] == []


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


@pytest.mark.parametrize("packed", sorted(SHARED_TRACES.rglob("*.gz")) + [H200_TRACE], ids=lambda p: p.name[:24])
def test_the_events_a_trace_holds_are_estimated_from_a_sample_of_its_text(tmp_path, packed):
    """Within 10% on every real trace, gzip and plain: a GPU trace's events are a third smaller
    than a CPU trace's, which the file's size alone cannot tell."""
    import gzip

    text = gzip.decompress(packed.read_bytes())
    events = len(json.loads(text)["traceEvents"])
    plain = tmp_path / "plain.json"
    plain.write_bytes(text)
    for path in (packed, plain):
        assert abs(trace_blocks.events_in_trace(path) - events) <= 0.10 * events


@pytest.mark.parametrize("trailer_mib, by_ratio_mib, expected_mib", [
    (100, 95, 100),  # the trailer's size, not the head's ratio
    (1024, 9 * 1024, 9 * 1024),  # 9 GiB expanded: the trailer holds 9 GiB modulo 4 GiB
    (4095, 8 * 1024 + 100, 4095 + 4096),  # the multiple of 4 GiB nearest the ratio's estimate
    (10, 200, 200),  # several gzip members: the trailer is the last one's, the ratio is kept
])
def test_a_gzip_files_expanded_size_comes_from_its_trailer(tmp_path, trailer_mib, by_ratio_mib, expected_mib):
    path = tmp_path / "t.gz"
    path.write_bytes(b"\x1f\x8b" + bytes(30) + (trailer_mib * 2**20 % 2**32).to_bytes(4, "little"))
    with open(path, "rb") as fh:
        got = trace_blocks._expanded_size(fh, path.stat().st_size, by_ratio_mib * 2**20)
    assert got == expected_mib * 2**20


def test_benchmarks_tables_diff_tells_equal_tables_from_others(tmp_path, monkeypatch):
    """The script that compares two parses row for row (used on traces too large for a test)."""
    import subprocess
    import sys

    from shared_data import REPO_ROOT

    trace = _gpu_trace(tmp_path / "g.json")
    _parse(trace, tmp_path / "whole", monkeypatch, None)
    _parse(trace, tmp_path / "segmented", monkeypatch, 30)
    _parse(_training_trace(tmp_path / "t.json"), tmp_path / "other", monkeypatch, None)
    script = str(REPO_ROOT / "benchmarks" / "tables_diff.py")
    same = subprocess.run([sys.executable, script, str(tmp_path / "whole" / "tables"),
                           str(tmp_path / "segmented" / "tables")], capture_output=True, text=True)
    assert same.returncode == 0 and same.stdout.strip().endswith(f"{len(TABLES)} tables, 0 differ")
    other = subprocess.run([sys.executable, script, str(tmp_path / "whole" / "tables"),
                            str(tmp_path / "other" / "tables")], capture_output=True, text=True)
    assert other.returncode == 1 and "device_ops.parquet: " in other.stdout
