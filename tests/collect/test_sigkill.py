"""A job killed with SIGKILL mid-run leaves every finished window intact."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from .conftest import load_json

pytestmark = pytest.mark.slow

TRAIN_FOREVER = textwrap.dedent(
    """
    import sys, time, torch, mlprof
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 8))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(512, 64)
    with mlprof.profile(
        activities=[mlprof.ProfilerActivity.CPU],
        schedule=mlprof.schedule(wait=0, warmup=1, active=2),
        on_trace_ready=mlprof.tensorboard_trace_handler(sys.argv[1], analyse_flag=False),
        experimental_config=mlprof.ExperimentalConfig(gc_detect_threshold=0),
    ) as prof:
        for step in range(100000):
            mlprof.mstx.mark("step")
            loss = model(x).square().mean()
            opt.zero_grad(); loss.backward(); opt.step()
            prof.step()
    """
)


def test_sigkill_leaves_finished_windows_complete(tmp_path):
    out = tmp_path / "out"
    job = subprocess.Popen([sys.executable, "-c", TRAIN_FOREVER, str(out)], stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            windows = list(out.glob("*_mlprof/raw/window_*"))
            if len(windows) >= 3:
                break
            assert job.poll() is None, "the training job died on its own"
            time.sleep(0.05)
        else:
            pytest.fail("the job wrote fewer than 3 windows in 120 s")
        job.send_signal(signal.SIGKILL)
    finally:
        job.kill()
        job.wait()

    (capture,) = out.glob("*_mlprof")
    info = load_json(capture / "profiler_info.json")  # still valid JSON
    assert info["status"] == "running"
    raw = capture / "raw"
    finished = sorted(p for p in raw.iterdir() if p.name.startswith("window_"))
    leftovers = [p for p in raw.iterdir() if not p.name.startswith("window_")]
    assert len(finished) >= 3
    assert all(p.name.startswith(".partial_window_") for p in leftovers) and len(leftovers) <= 1
    listed = {w["dir"] for w in info["windows"]}
    # The manifest may lag one window behind a kill; never ahead of the disk.
    assert listed <= {f"raw/{p.name}" for p in finished}
    assert len(listed) >= len(finished) - 1
    for window in finished:
        meta = load_json(window / "window.json")
        assert meta["status"] == "complete"
        steps = load_json(window / "steps.json")
        assert len(steps) == 2 and meta["first_step"] == steps[0]["step"]
        trace = load_json(window / "kineto.pt.trace.json")
        assert sum(str(e.get("name", "")).startswith("ProfilerStep#") for e in trace["traceEvents"]) == 2
        for name in ("markers.json", "gc.json"):
            json.loads((window / name).read_text())
        assert not [p for p in window.iterdir() if p.name.endswith(".tmp")]
