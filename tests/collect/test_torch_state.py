"""The torch settings each window records (profiler_metadata.json torch_state), read from real torch state."""

from __future__ import annotations

import pytest

import mlprof
from mlprof.collect.torch_state import state_changes, torch_state

from .conftest import load_json

torch = pytest.importorskip("torch")


@pytest.fixture
def restore_torch_state():
    """Debug modes are process-wide: put them back whatever a test does."""
    anomaly, check_nan = torch.is_anomaly_enabled(), torch.is_anomaly_check_nan_enabled()
    deterministic = torch.are_deterministic_algorithms_enabled()
    warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
    threads = torch.get_num_threads()
    benchmark = torch.backends.cudnn.benchmark
    yield
    torch.autograd.set_detect_anomaly(anomaly, check_nan=check_nan)
    torch.use_deterministic_algorithms(deterministic, warn_only=warn_only)
    torch.set_num_threads(threads)
    torch.backends.cudnn.benchmark = benchmark


def _run(tmp_path, trainer, steps=6, between=None, windows=1):
    """``between(step)`` runs after each step's training, inside the profiled steps."""
    with mlprof.profile(
        activities=[mlprof.ProfilerActivity.CPU],
        schedule=mlprof.schedule(wait=1, warmup=0, active=2, repeat=windows),
        on_trace_ready=mlprof.tensorboard_trace_handler(tmp_path / "result", worker_name="w0", analyse_flag=False),
    ) as prof:
        for step in range(steps):
            trainer.step()
            if between:
                between(step)
            prof.step()
    return load_json(prof.capture_dir / "profiler_metadata.json")["torch_state"]


def test_the_settings_read_are_the_real_ones(restore_torch_state):
    torch.autograd.set_detect_anomaly(True, check_nan=False)
    torch.use_deterministic_algorithms(True, warn_only=True)
    with torch.no_grad():
        state = torch_state()
    assert state["anomaly_enabled"] is True and state["anomaly_check_nan"] is False
    assert state["deterministic_algorithms"] is True and state["deterministic_warn_only"] is True
    assert state["grad_enabled"] is False and state["inference_mode"] is False
    assert state["num_threads"] == torch.get_num_threads()
    assert state["float32_matmul_precision"] == torch.get_float32_matmul_precision()
    torch.autograd.set_detect_anomaly(False)
    torch.use_deterministic_algorithms(False)
    off = torch_state()
    assert off["anomaly_enabled"] is False and off["deterministic_algorithms"] is False and off["grad_enabled"] is True


def test_each_window_records_its_settings_at_start(tmp_path, trainer, restore_torch_state):
    torch.autograd.set_detect_anomaly(True)
    torch.use_deterministic_algorithms(True, warn_only=True)
    (entry,) = _run(tmp_path, trainer)
    assert entry["window"] == 0 and entry["changed"] == {}
    start = entry["at_start"]
    assert start["anomaly_enabled"] is True and start["anomaly_check_nan"] is True
    assert start["deterministic_algorithms"] is True and start["deterministic_warn_only"] is True
    # Read on the training thread, where the loop runs with grad on.
    assert start["grad_enabled"] is True


def test_a_setting_changed_inside_a_window_is_noted(tmp_path, trainer, restore_torch_state):
    torch.autograd.set_detect_anomaly(False)

    def switch(step):
        if step == 1:  # the first profiled step: the window opened at step 1's start
            torch.autograd.set_detect_anomaly(True)
            torch.set_num_threads(1)

    first, second = _run(tmp_path, trainer, steps=8, between=switch, windows=2)
    assert first["at_start"]["anomaly_enabled"] is False
    assert first["changed"]["anomaly_enabled"] == [False, True]
    assert second["at_start"]["anomaly_enabled"] is True and "anomaly_enabled" not in second["changed"]


def test_state_changes_lists_only_what_differs():
    assert state_changes({"a": 1, "b": True}, {"a": 1, "b": False, "c": "x"}) == {"b": [True, False], "c": [None, "x"]}
    assert state_changes({}, {}) == {}
