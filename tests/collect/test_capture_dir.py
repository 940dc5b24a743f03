"""The raw capture directory a real training loop leaves behind."""

from __future__ import annotations

import gc
import stat
import sys
import time

import pytest

import mlprof

from .conftest import load_json, windows_of


def run_profiled(tmp_path, trainer, steps=6, level=mlprof.ProfilerLevel.Level0, gc_threshold=None, **kwargs):
    config = mlprof.ExperimentalConfig(profiler_level=level, gc_detect_threshold=gc_threshold)
    with mlprof.profile(
        activities=[mlprof.ProfilerActivity.CPU],
        schedule=mlprof.schedule(wait=1, warmup=1, active=2, repeat=1),
        on_trace_ready=mlprof.tensorboard_trace_handler(tmp_path / "result", worker_name="w0", analyse_flag=False),
        experimental_config=config,
        **kwargs,
    ) as prof:
        prof.add_metadata("experiment", "baseline")
        prof.add_metadata_json("hyper", '{"lr": 0.05, "layers": [32, 64, 4]}')
        for step in range(steps):
            mlprof.mstx.mark(f"step {step} begins")
            with mlprof.mstx.range("forward+backward"):
                trainer.step()
            gc.collect()
            prof.step()
    return prof


def test_capture_dir_has_manifest_metadata_and_one_window(tmp_path, trainer, monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    monkeypatch.setenv("NCCL_DEBUG", "INFO")
    monkeypatch.setenv("NCCL_SECRET_TOKEN", "hunter2")
    prof = run_profiled(tmp_path, trainer)
    capture = prof.capture_dir
    assert capture.parent == tmp_path / "result"
    assert capture.name.startswith("w0_") and capture.name.endswith("_mlprof")

    info = load_json(capture / "profiler_info.json")
    assert info["schema_version"] == 1
    assert info["status"] == "finished"
    assert info["versions"]["torch"] == pytest.importorskip("torch").__version__
    assert info["versions"]["mlprof"] == mlprof.__version__
    assert (info["rank"], info["world_size"]) == (0, 1)
    assert info["config"]["experimental_config"]["profiler_level"] == "Level0"
    assert info["clock"]["wall_ns"] > 1_600_000_000 * 10**9
    assert len(info["windows"]) == 1 and info["windows"][0]["status"] == "complete"

    meta = load_json(capture / "profiler_metadata.json")
    assert meta["user"] == {"experiment": "baseline", "hyper": {"lr": 0.05, "layers": [32, 64, 4]}}
    assert meta["environment"]["OMP_NUM_THREADS"] == "2"
    assert meta["environment"]["NCCL_DEBUG"] == "INFO"
    assert "NCCL_SECRET_TOKEN" not in meta["environment"]

    (window,) = windows_of(capture)
    assert load_json(window / "window.json")["status"] == "complete"
    trace = load_json(window / "kineto.pt.trace.json")
    names = {e.get("name") for e in trace["traceEvents"]}
    assert {"aten::addmm", "aten::mm"} & names, "framework ops are missing from the Kineto trace"
    assert "experiment" in trace  # user metadata travels with the trace too


def test_directories_are_0750_and_files_0640(tmp_path, trainer):
    prof = run_profiled(tmp_path, trainer)
    for path in [prof.capture_dir, *prof.capture_dir.rglob("*")]:
        mode = stat.S_IMODE(path.stat().st_mode)
        assert mode == (0o750 if path.is_dir() else 0o640), f"{path} has mode {oct(mode)}"


def test_markers_steps_and_gc_pauses_are_recorded_on_the_kineto_clock(tmp_path, trainer):
    prof = run_profiled(tmp_path, trainer, gc_threshold=0.0)
    (window,) = windows_of(prof.capture_dir)
    steps = load_json(window / "steps.json")
    assert [s["step"] for s in steps] == [2, 3]
    # The process's CPU time in each step, and (Linux) the stepping thread's wait for a core.
    assert all(0 < s["cpu_ns"] for s in steps)
    if sys.platform.startswith("linux"):
        assert all(0 <= s["cpu_wait_ns"] <= s["end_ns"] - s["start_ns"] for s in steps)
    markers = load_json(window / "markers.json")
    assert [m["name"] for m in markers["marks"]] == ["step 2 begins", "step 3 begins"]
    assert [r["name"] for r in markers["ranges"]] == ["forward+backward"] * 2
    gc_pauses = load_json(window / "gc.json")
    assert len(gc_pauses) >= 2 and all(p["generation"] == 2 for p in gc_pauses if p["dur_ns"] > 0)

    # Every mlprof timestamp falls inside the matching ProfilerStep of torch's trace.
    trace = load_json(window / "kineto.pt.trace.json")
    base_ns = trace["baseTimeNanoseconds"]
    spans = {
        int(e["name"].split("#")[1]): (base_ns + round(e["ts"] * 1000), base_ns + round((e["ts"] + e["dur"]) * 1000))
        for e in trace["traceEvents"] if str(e.get("name", "")).startswith("ProfilerStep#")
    }
    slack_ns = 2_000_000
    gaps = []
    for step, mark, rng in zip(steps, markers["marks"], markers["ranges"]):
        lo, hi = spans[step["step"]]
        # Each boundary is its own step's, not a neighbour's, and inside it: mlprof reads the clock just
        # after torch opens a step and just before torch closes it ...
        assert min(spans, key=lambda n: abs(step["start_ns"] - spans[n][0])) == step["step"]
        assert min(spans, key=lambda n: abs(step["end_ns"] - spans[n][1])) == step["step"]
        assert lo - slack_ns <= step["start_ns"] < step["end_ns"] <= hi + slack_ns
        gaps += [abs(step["start_ns"] - lo), abs(step["end_ns"] - hi)]
        assert lo - slack_ns <= mark["ts_ns"] <= hi
        assert lo - slack_ns <= rng["start_ns"] < rng["end_ns"] <= hi + slack_ns
    # ... on the same clock: a clock off by a base or a unit would part every boundary from torch's. Not each
    # one within the slack: a preemption between the two readings parts them by a time slice on a busy
    # machine (with two busy loops on 2 cores both step ends were 6-8 ms before torch's, the starts 30 us).
    assert min(gaps) < slack_ns, gaps


def test_gc_threshold_filters_short_pauses_and_none_turns_detection_off(tmp_path, trainer):
    prof = run_profiled(tmp_path / "a", trainer, gc_threshold=10_000.0)  # 10 s: nothing qualifies
    assert load_json(windows_of(prof.capture_dir)[0] / "gc.json") == []
    prof = run_profiled(tmp_path / "b", trainer, gc_threshold=None)
    assert load_json(windows_of(prof.capture_dir)[0] / "gc.json") == []


def test_level_none_records_steps_and_markers_without_torch_profiler(tmp_path, trainer):
    prof = run_profiled(tmp_path, trainer, level=mlprof.ProfilerLevel.Level_none)
    (window,) = windows_of(prof.capture_dir)
    assert not (window / "kineto.pt.trace.json").exists()
    assert load_json(window / "window.json")["kineto_events_written"] is False
    assert [s["step"] for s in load_json(window / "steps.json")] == [2, 3]
    assert len(load_json(window / "markers.json")["marks"]) == 2


def test_level1_records_input_shapes(tmp_path, trainer):
    prof = run_profiled(tmp_path, trainer, level=mlprof.ProfilerLevel.Level1)
    trace = load_json(windows_of(prof.capture_dir)[0] / "kineto.pt.trace.json")
    shapes = [e["args"]["Input Dims"] for e in trace["traceEvents"] if e.get("name") == "aten::addmm"]
    assert shapes and [256, 32] in shapes[0]


def test_two_sessions_write_two_capture_dirs(tmp_path, trainer):
    first = run_profiled(tmp_path, trainer).capture_dir
    second = run_profiled(tmp_path, trainer).capture_dir
    assert first != second and first.parent == second.parent


def test_host_sys_samples_the_process_into_the_capture(tmp_path, trainer):
    config = mlprof.ExperimentalConfig(host_sys=["cpu", "mem"])
    with mlprof.profile(activities=[mlprof.ProfilerActivity.CPU],
                        on_trace_ready=mlprof.tensorboard_trace_handler(tmp_path, analyse_flag=False),
                        experimental_config=config) as prof:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not _has_samples(prof.capture_dir, 3):
            trainer.step()
            prof.step()
    samples = load_json(prof.capture_dir / "host_samples.json")
    assert len(samples) >= 3
    assert all(s["job_rss_bytes"] > 10 * 2**20 and 0 <= s["cpu_percent"] <= 100 for s in samples)
    assert "disk_read_bytes_per_s" not in samples[0], "only the asked groups are sampled"
    assert not (prof.capture_dir / "host_samples.jsonl").exists()


def _has_samples(capture, count):
    path = capture / "host_samples.jsonl"
    return path.exists() and len(path.read_text().splitlines()) > count


def test_existing_output_and_log_directories_keep_their_mode(tmp_path, trainer):
    """Issue 30, item 2: an existing output dir (a sticky 1777 one) and the dynamic log dir were chmodded 0750."""
    import os

    from mlprof.collect.dynamic_logs import DynamicLogs

    result = tmp_path / "result"
    result.mkdir()
    os.chmod(result, 0o1777)
    run_profiled(tmp_path, trainer)
    assert stat.S_IMODE(os.stat(result).st_mode) == 0o1777
    assert all(stat.S_IMODE(c.stat().st_mode) == 0o750 for c in result.iterdir() if c.is_dir())  # made here
    (tmp_path / "dyn" / "log").mkdir(parents=True)
    os.chmod(tmp_path / "dyn" / "log", 0o1777)
    DynamicLogs.open(tmp_path / "dyn", lambda: 0).close()
    assert stat.S_IMODE(os.stat(tmp_path / "dyn" / "log").st_mode) == 0o1777
