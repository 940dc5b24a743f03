"""Suite-wide hygiene: no test may leave a profiler attached."""

from __future__ import annotations

import gc
import sys
import threading
from pathlib import Path

import pytest

from shared_data import SHARED_ASCEND, SHARED_TRACES


@pytest.fixture
def shared_traces() -> Path:
    """The real Kineto traces of ../shared/data/traces (read-only); skips when absent."""
    if not SHARED_TRACES.is_dir():
        pytest.skip(f"shared traces not found at {SHARED_TRACES}")
    return SHARED_TRACES


@pytest.fixture
def ascend_data() -> Path:
    """The real torch_npu output of ../shared/data/ascend/alexnet_ddp_910b (read-only); skips when absent."""
    if not SHARED_ASCEND.is_dir():
        pytest.skip(f"shared Ascend data not found at {SHARED_ASCEND}")
    return SHARED_ASCEND


@pytest.fixture(autouse=True)
def _no_profiler_left_attached():
    yield
    from mlprof.collect import recorder

    assert recorder.active_recorder() is None, "an mlprof window recorder is still attached"
    assert not recorder._open_ranges, "mstx ranges leaked out of a window"
    from mlprof.collect import scalars

    assert scalars.active_log() is None, "an mlprof scalar log (log_scalar) is still recording"
    leaked = [cb for cb in gc.callbacks if getattr(cb, "__self__", None).__class__.__name__ == "HostRecorder"]
    assert not leaked, "an mlprof GC callback is still installed"
    from mlprof.collect.stack_sampler import THREAD_NAME

    assert not any(t.name == THREAD_NAME for t in threading.enumerate()), "a Python stack sampler is still running"
    torch = sys.modules.get("torch")
    if torch is not None:
        assert not torch.autograd._profiler_enabled(), "torch's profiler is still running"
        hooks = sys.modules["torch.nn.modules.module"]
        left = [h for h in (*hooks._global_forward_pre_hooks.values(), *hooks._global_forward_hooks.values())
                if getattr(h, "__self__", None).__class__.__name__ == "ModuleRecorder"]
        assert not left, "mlprof's global module hooks are still installed"
