"""Failures inside the profiler are logged once and switch it off; training goes on."""

from __future__ import annotations

import errno
import logging

import pytest

import mlprof
from mlprof.capture import files
from mlprof.collect import torch_backend

from .conftest import load_json


def train_under_profiler(trainer, handler, steps=8):
    with mlprof.profile(
        activities=[mlprof.ProfilerActivity.CPU],
        schedule=mlprof.schedule(wait=0, warmup=1, active=1, repeat=0),
        on_trace_ready=handler,
    ) as prof:
        for _ in range(steps):
            with mlprof.mstx.range("step"):
                trainer.step()
            prof.step()
    return prof


def assert_training_completed(trainer, steps=8):
    assert len(trainer.losses) == steps
    assert trainer.losses[-1] < trainer.losses[0], "the model did not keep learning"


def errors_from_mlprof(caplog):
    return [r for r in caplog.records if r.name == "mlprof" and r.levelno >= logging.ERROR]


def test_disk_full_while_writing_a_window(tmp_path, trainer, monkeypatch, caplog):
    real_write = files.write_json_atomic
    calls = {"n": 0}

    def full_disk_after_manifest(path, data):
        calls["n"] += 1
        if path.name == "steps.json":
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(path, data)

    monkeypatch.setattr("mlprof.collect.profiler.write_json_atomic", full_disk_after_manifest)
    prof = train_under_profiler(trainer, mlprof.tensorboard_trace_handler(tmp_path, analyse_flag=False))
    assert_training_completed(trainer)
    assert not prof.enabled
    (error,) = errors_from_mlprof(caplog)
    assert "No space left on device" in error.getMessage() and "training continues" in error.getMessage()
    info = load_json(prof.capture_dir / "profiler_info.json")
    assert info["status"] == "failed" and "No space left" in info["error"]
    assert info["windows"] == []


def test_unwritable_output_dir(tmp_path, trainer, caplog):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a directory")
    prof = train_under_profiler(trainer, mlprof.tensorboard_trace_handler(blocker / "out", analyse_flag=False))
    assert_training_completed(trainer)
    assert not prof.enabled and prof.capture_dir is None
    assert len(errors_from_mlprof(caplog)) == 1


def test_torch_error_at_window_end(tmp_path, trainer, monkeypatch, caplog):
    def broken_export(self, path, *args, **kwargs):
        raise RuntimeError("Kineto exploded")

    monkeypatch.setattr(torch_backend.ScheduledBackend, "export_chrome_trace", broken_export)
    prof = train_under_profiler(trainer, mlprof.tensorboard_trace_handler(tmp_path, analyse_flag=False))
    assert_training_completed(trainer)
    assert not prof.enabled
    (error,) = errors_from_mlprof(caplog)
    assert "Kineto exploded" in error.getMessage()


def test_failing_user_callback(trainer, caplog):
    def on_trace_ready(prof):
        raise ValueError("user handler bug")

    prof = train_under_profiler(trainer, on_trace_ready)
    assert_training_completed(trainer)
    assert not prof.enabled
    assert "user handler bug" in errors_from_mlprof(caplog)[0].getMessage()


def test_configuration_mistakes_are_reported_before_training_starts():
    with pytest.raises(mlprof.MlprofError, match="profiler_level"):
        mlprof.ExperimentalConfig(profiler_level="Level9")
    with pytest.raises(mlprof.MlprofError, match="gc_detect_threshold"):
        mlprof.ExperimentalConfig(gc_detect_threshold=-1)
    with pytest.raises(mlprof.MlprofError, match="torch_npu"):
        mlprof.profile(activities=[mlprof.ProfilerActivity.NPU])
    with pytest.raises(mlprof.MlprofError, match="on_trace_ready"):
        mlprof.profile(on_trace_ready="not callable")
