"""Suite-wide hygiene: no test may leave a profiler attached."""

from __future__ import annotations

import gc
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_TRACES = REPO_ROOT.parent / "shared" / "data" / "traces"


@pytest.fixture(autouse=True)
def _no_profiler_left_attached():
    yield
    from mlprof.collect import recorder

    assert recorder.active_recorder() is None, "an mlprof window recorder is still attached"
    assert not recorder._open_ranges, "mstx ranges leaked out of a window"
    leaked = [cb for cb in gc.callbacks if getattr(cb, "__self__", None).__class__.__name__ == "HostRecorder"]
    assert not leaked, "an mlprof GC callback is still installed"
    torch = sys.modules.get("torch")
    if torch is not None:
        assert not torch.autograd._profiler_enabled(), "torch's profiler is still running"
