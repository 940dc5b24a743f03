"""A job that runs its own torch.profiler under `mlprof run` (issue 30, item 7).

torch runs one profiler session per process. When the job's session and
mlprof's overlapped, the job died with exit 139 (its trace export crashed),
whichever started first. mlprof must stand aside, in every order and with
every option: the job's exit code is its own and its trace is written.
Each case is a real job (real torch on CPU) run by the real CLI.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from .test_mlprof_run import captures, mlprof_run  # noqa: F401 - fixture

pytest.importorskip("torch")
pytestmark = pytest.mark.slow  # 2 real jobs under the real CLI (7 with MLPROF_LONG_TESTS=1)
SCRIPT = Path(__file__).with_name("own_profiler_script.py")
JOB_EXIT_CODE = 3
# mlprof's window here: steps 3 (warm-up) to 6 (recorded); the job's steps count from 0.
WINDOW = ["--skip-first", "3", "--warmup", "1", "--active", "3"]

# Where the job's session starts against mlprof's, as own_profiler_script.py arguments:
ORDERS = {
    # built and prepared before the first optimizer step, enabled at step 10: mlprof has not started yet
    "job-prepared-before-mlprof-starts": ["20", "0", "--warmup", "10"],
    # built before the first optimizer step, its session starts at step 5, inside mlprof's window
    "job-built-early-starts-in-a-window": ["20", "5", "--build-at", "0"],
    # built and started at step 5, inside mlprof's window
    "job-starts-in-a-window": ["20", "5"],
    # built before the first optimizer step, its session starts at step 12, after mlprof's window
    "job-built-early-starts-after-the-window": ["20", "12", "--build-at", "0"],
}
# Python sampling is on by default (and with WINDOW alone): "defaults" covers it.
OPTIONS = {
    "defaults": [],
    "repeat-0": [*WINDOW, "--repeat", "0"],
    "no-python-sampling": [*WINDOW, "--no-python-sampling"],
}


# Every order with the defaults; the other options with the order where the two sessions overlap most (the
# job's session built before mlprof's window and started inside it): 6 real jobs, not 12 (CI's budget).
# (The other options run with MLPROF_LONG_TESTS=1: tests/conftest.py.)
_DEFAULT_ORDERS = ("job-built-early-starts-in-a-window",)
CASES = [pytest.param(o, "defaults", id=f"{o}-defaults", marks=() if o in _DEFAULT_ORDERS else pytest.mark.long)
         for o in ORDERS] + [
    pytest.param("job-built-early-starts-in-a-window", k, id=f"job-built-early-starts-in-a-window-{k}",
                 marks=pytest.mark.long) for k in OPTIONS if k != "defaults"]


@pytest.mark.parametrize("order_name,options_name", CASES)
def test_a_job_profiling_itself_keeps_its_exit_code_and_its_trace(tmp_path, order_name, options_name):
    order, options = ORDERS[order_name], OPTIONS[options_name]
    trace = tmp_path / "own.json"
    out = tmp_path / "out"
    result = mlprof_run(out, sys.executable, str(SCRIPT), *order[:2], str(trace), *order[2:],
                        "--exit-code", str(JOB_EXIT_CODE), options=options)
    assert result.returncode == JOB_EXIT_CODE, result.stderr[-3000:]
    assert "trained 1" in result.stdout
    assert json.loads(trace.read_text())["traceEvents"], "the job's own trace must be written"
    assert "Traceback" not in result.stderr and "already enabled" not in result.stderr, result.stderr[-3000:]
    for capture in captures(out):
        info = json.loads((capture / "profiler_info.json").read_text())
        assert info["status"] == "finished", info
        if not info["windows"]:  # mlprof stood aside before its first window: run says why, once
            assert info["stopped_early"].startswith("the job started its own torch profiler")
            assert result.stderr.count("nothing was captured: the job started its own torch profiler") == 1


@pytest.mark.long  # 22 s; the job-profiler runs above keep the own-profiler path in CI (2026-11-29)
def test_a_repeating_job_profiler_under_repeat_0_gets_every_trace(tmp_path):
    trace = tmp_path / "own.json"
    result = mlprof_run(tmp_path / "out", sys.executable, str(SCRIPT), "30", "2", str(trace), "--build-at", "0",
                        "--wait", "1", "--repeat", "0", options=[*WINDOW, "--repeat", "0"])
    assert result.returncode == 0, result.stderr[-3000:]
    # 28 steps from step 2, 4 steps a cycle (wait 1, warm-up 1, 2 recorded): 7 traces.
    assert "trained 7" in result.stdout
    assert all(json.loads(p.read_text())["traceEvents"] for p in tmp_path.glob("own.json*"))
