"""mstx markers, export_chrome_trace, export_stacks, export_memory_timeline, _KinetoProfile."""

from __future__ import annotations

import gzip
import json

import pytest

import mlprof
from mlprof.collect import recorder

from .conftest import load_json


def test_markers_outside_a_window_do_nothing_and_still_return_ids():
    assert recorder.active_recorder() is None
    mlprof.mstx.mark("nobody listens")
    first = mlprof.mstx.range_start("idle")
    second = mlprof.mstx.range_start("idle")
    assert first != second
    mlprof.mstx.range_end(first)
    mlprof.mstx.range_end(12345678)  # unknown ids are ignored
    mlprof.mstx.range_end(second)


def test_range_works_as_context_manager_and_decorator_and_shows_in_the_exported_trace(tmp_path, trainer):
    @mlprof.mstx.range("decorated train step")
    def train_step():
        return trainer.step()

    prof = mlprof._KinetoProfile(activities=[mlprof.ProfilerActivity.CPU])
    prof.start()
    mlprof.mstx.mark("before")
    with mlprof.mstx.range("with block"):
        train_step()
    left_open = mlprof.mstx.range_start("never closed")
    prof.stop()
    mlprof.mstx.range_end(left_open)  # after the window: ignored
    out = tmp_path / "trace.json"
    prof.export_chrome_trace(out)
    events = load_json(out)["traceEvents"]
    mstx = {e["name"]: e for e in events if e.get("cat") == "mstx"}
    assert set(mstx) == {"before", "with block", "decorated train step"}
    outer, inner = mstx["with block"], mstx["decorated train step"]
    assert outer["ts"] <= inner["ts"] and inner["ts"] + inner["dur"] <= outer["ts"] + outer["dur"] + 1
    # Markers sit on the same clock as torch's ops: the op ran inside the range.
    addmm = [e for e in events if e.get("name") == "aten::addmm"]
    assert addmm and all(outer["ts"] <= e["ts"] <= outer["ts"] + outer["dur"] for e in addmm)


def test_kineto_profile_keeps_torch_statistics(trainer):
    with mlprof._KinetoProfile(activities=[mlprof.ProfilerActivity.CPU]) as prof:
        trainer.step()
    names = {row.key for row in prof.key_averages()}
    assert "aten::addmm" in names
    assert not hasattr(prof, "step")


def test_export_chrome_trace_gz_is_valid_gzipped_json(tmp_path, trainer):
    with mlprof.profile(activities=[mlprof.ProfilerActivity.CPU]) as prof:
        mlprof.mstx.mark("inside")
        trainer.step()
    prof.export_chrome_trace(tmp_path / "t.json.gz")
    with gzip.open(tmp_path / "t.json.gz", "rt") as f:
        events = json.load(f)["traceEvents"]
    assert any(e.get("cat") == "mstx" and e["name"] == "inside" for e in events)


def test_level_none_export_has_steps_and_markers_only(tmp_path, trainer):
    config = mlprof.ExperimentalConfig(profiler_level=mlprof.ProfilerLevel.Level_none)
    with mlprof.profile(activities=[mlprof.ProfilerActivity.CPU], experimental_config=config) as prof:
        for _ in range(3):
            mlprof.mstx.mark("tick")
            trainer.step()
            prof.step()
    prof.export_chrome_trace(tmp_path / "t.json")
    events = load_json(tmp_path / "t.json")["traceEvents"]
    assert sorted(e["name"] for e in events if e["cat"] == "step") == [f"ProfilerStep#{i}" for i in range(4)]
    assert sum(e["name"] == "tick" for e in events) == 3
    assert not any(str(e.get("name", "")).startswith("aten::") for e in events)


def test_mstx_switch_off_records_no_markers(tmp_path, trainer):
    config = mlprof.ExperimentalConfig(mstx=False)
    with mlprof.profile(activities=[mlprof.ProfilerActivity.CPU], experimental_config=config) as prof:
        mlprof.mstx.mark("ignored")
        trainer.step()
    prof.export_chrome_trace(tmp_path / "t.json")
    assert not [e for e in load_json(tmp_path / "t.json")["traceEvents"] if e.get("cat") == "mstx"]


def test_export_stacks_writes_collapsed_stacks(tmp_path, trainer):
    with mlprof.profile(activities=[mlprof.ProfilerActivity.CPU], with_stack=True) as prof:
        trainer.step()
    prof.export_stacks(tmp_path / "stacks.txt", "self_cpu_time_total")
    lines = (tmp_path / "stacks.txt").read_text().splitlines()
    assert lines, "no stacks written"
    # FlameGraph's collapsed format: frames joined by ';' then a space and a count.
    rows = [line.rsplit(" ", 1) for line in lines]
    assert all(int(count) >= 0 for _, count in rows)
    assert any(";" in stack and "test_markers_and_exports.py" in stack for stack, _ in rows)


def test_export_stacks_without_stacks_is_refused(trainer):
    with mlprof.profile(activities=[mlprof.ProfilerActivity.CPU]) as prof:
        trainer.step()
    with pytest.raises(mlprof.MlprofError, match="with_stack"):
        prof.export_stacks("unused.txt")


def test_export_memory_timeline_json(tmp_path, trainer):
    config = mlprof.ExperimentalConfig(profiler_level=mlprof.ProfilerLevel.Level2)
    with mlprof.profile(activities=[mlprof.ProfilerActivity.CPU], experimental_config=config) as prof:
        for _ in range(2):
            trainer.step()
            prof.step()
    prof.export_memory_timeline(tmp_path / "memory.json", device="cpu")
    times, sizes = load_json(tmp_path / "memory.json")
    assert len(times) == len(sizes) > 0
    assert max(sum(row) for row in sizes) > 0, "the timeline shows no memory in use"
    with pytest.raises(mlprof.MlprofError, match=r"\.html"):
        prof.export_memory_timeline(tmp_path / "memory.txt")
