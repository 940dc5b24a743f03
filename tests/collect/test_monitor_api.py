"""Monitor mode through the API (``ExperimentalConfig(monitor=True)``), in-process with real torch."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")

import mlprof  # noqa: E402
from mlprof.capture.job_series import read_series  # noqa: E402
from mlprof.errors import ConfigError  # noqa: E402


def _monitored(out, **kwargs):
    return mlprof.profile(activities=[mlprof.ProfilerActivity.CPU],
                          on_trace_ready=mlprof.tensorboard_trace_handler(out, analyse_flag=False),
                          experimental_config=mlprof.ExperimentalConfig(monitor=True), **kwargs)


def _train(out, steps, stall_s=lambda step: 0.0):
    """A tiny model's steps under monitor mode (``stall_s(step)``: a sleep in the step); the profiler."""
    import time as time_module

    model = torch.nn.Linear(16, 16)
    x = torch.randn(8, 16)
    with _monitored(out) as prof:
        for step in range(steps):
            model(x).sum().backward()
            if stall_s(step):
                time_module.sleep(stall_s(step))
            prof.step()
        assert prof.step_num == steps
    return prof


def test_monitor_mode_decides_its_windows_and_needs_a_capture(tmp_path):
    with pytest.raises(ConfigError, match="give no schedule"):
        _monitored(tmp_path, schedule=mlprof.schedule(wait=1, active=1))
    with pytest.raises(ConfigError, match="tensorboard_trace_handler"):
        mlprof.profile(experimental_config=mlprof.ExperimentalConfig(monitor=True))


def test_every_step_is_in_the_series_and_a_baseline_window_is_recorded_at_level1(tmp_path):
    capture = _train(tmp_path, 90).capture_dir
    records = read_series(capture / "job_steps.bin")
    assert [r[0] for r in records] == list(range(90)) and all(r[1] == 1 for r in records)
    info = json.loads((capture / "job_monitor.json").read_text())
    assert info["steps"] == 90 and info["windows"][0]["reason"] == "baseline"
    manifest = json.loads((capture / "profiler_info.json").read_text())
    first = manifest["windows"][0]
    assert first["first_step"] == info["windows"][0]["first_step"] == 6
    window = json.loads((capture / "raw" / "window_0000" / "window.json").read_text())
    assert window["level"] == "Level1"  # the default Level0 is raised for monitor windows
    # Steps inside the window are marked covered (1), its warm-up step 2, the others 0.
    covered = {r[0]: r[9] for r in records}
    assert covered[5] == 2 and covered[6] == 1 and covered[4] == 0


def test_no_profiler_step_annotation_is_built_where_nothing_records(tmp_path):
    """Between windows torch's step() built and entered a ProfilerStep#N record_function every step; mlprof's
    backend skips it there (the largest part of monitor mode's cost per step) and keeps it inside windows."""
    prof = mlprof.profile(activities=[mlprof.ProfilerActivity.CPU], schedule=mlprof.schedule(wait=2, active=2),
                          on_trace_ready=mlprof.tensorboard_trace_handler(tmp_path, analyse_flag=False))
    open_annotation = []
    with prof:
        for _ in range(9):
            torch.ones(4).sum()
            prof.step()
            open_annotation.append(prof._backend.step_rec_fn is not None)
    # Steps 2-3 and 6-7 record (their annotation is open while they run); 1, 4-5 and 8-9 are outside windows.
    assert open_annotation == [False, True, True, False, False, True, True, False, False]
    window = json.loads((prof.capture_dir / "raw" / "window_0000" / "window.json").read_text())
    assert (window["first_step"], window["last_step"]) == (2, 3)


def test_short_steps_between_windows_share_one_reading_and_every_step_is_still_recorded(tmp_path):
    """Between windows, steps under BATCH_NS / 2 take the fast path (a clock read): one schedstat and RSS read
    per batch, its CPU time and wait shared out by wall time. Every step keeps its own record and number,
    torch's step count and the profile's step numbers stay right, and a stop mid-batch loses no step."""
    from mlprof.collect import monitor as monitor_module

    steps = 301  # ends mid-batch
    prof = _train(tmp_path, steps)  # prof.step_num counts the fast path's steps all along
    info = json.loads((prof.capture_dir / "job_monitor.json").read_text())
    records = read_series(prof.capture_dir / "job_steps.bin")
    assert [r[0] for r in records] == list(range(steps)) and info["steps"] == steps
    # Short steps (sub-millisecond on a quiet machine, a few ms on a loaded one): batches of several steps, at
    # most MAX_BATCH_STEPS, and most steps after the window in them.
    assert 1 < info["max_batch_steps"] <= monitor_module.MAX_BATCH_STEPS
    last_window_step = info["windows"][-1]["last_step"]
    assert info["batched_steps"] > (steps - last_window_step) // 2
    after = [r for r in records if r[0] > last_window_step + 40]
    # A step's CPU time is its share of a batch: never negative, never above its wall time by much (the shares
    # are of the thread's time on a CPU, which the stepping thread spends in the step)...
    assert all(0 <= r[4] <= r[3] * 1.5 + 100_000 for r in after)
    # ...and consecutive steps start where the last one ended: at once inside a batch (one clock read ends a
    # step and starts the next), after the boundary's own work between batches.
    gaps = [b[2] - (a[2] + a[3]) for a, b in zip(after, after[1:])]
    assert min(gaps) >= 0 and sum(g == 0 for g in gaps) > 0.8 * len(gaps)
    manifest = json.loads((prof.capture_dir / "profiler_info.json").read_text())
    assert manifest["steps_seen"] == steps

