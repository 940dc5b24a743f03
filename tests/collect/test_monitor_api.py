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


def test_monitor_mode_decides_its_windows_and_needs_a_capture(tmp_path):
    with pytest.raises(ConfigError, match="give no schedule"):
        _monitored(tmp_path, schedule=mlprof.schedule(wait=1, active=1))
    with pytest.raises(ConfigError, match="tensorboard_trace_handler"):
        mlprof.profile(experimental_config=mlprof.ExperimentalConfig(monitor=True))


def test_every_step_is_in_the_series_and_a_baseline_window_is_recorded_at_level1(tmp_path):
    model = torch.nn.Linear(16, 16)
    x = torch.randn(8, 16)
    with _monitored(tmp_path) as prof:
        for _ in range(90):
            model(x).sum().backward()
            prof.step()
    capture = prof.capture_dir
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


def test_a_dynamic_config_asking_for_monitor_mode_is_refused_in_one_line():
    from mlprof.collect.dynamic_config import parse_config

    with pytest.raises(ConfigError, match="monitor is for a whole job"):
        parse_config(json.dumps({"start_step": 1, "active": 2, "experimental_config": {"monitor": True}}).encode(),
                     "profiler_config.json")


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
