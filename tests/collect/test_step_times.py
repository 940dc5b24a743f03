"""Profiled vs unprofiled step times: what profiling costs the job, and the advisor's sentence about it."""

from __future__ import annotations

import pytest

from types import SimpleNamespace

from mlprof.analysis.advisor.engine import profiling_cost_note
from mlprof.capture.records import StepTimes
from mlprof.collect.step_times import COLD_STEPS, StepTimer

MS = 1_000_000


def _timed(actions_and_ms):
    """A StepTimer fed steps of the given (action name, duration) with a fake clock."""
    timer, now = StepTimer(), 0
    for action, ms in actions_and_ms:
        timer.begin(now, SimpleNamespace(name=action))
        now += ms * MS
        timer.end(now)
    return timer


def test_cold_steps_and_warmup_steps_are_not_compared():
    steps = [("NONE", 500)] * COLD_STEPS + [("NONE", 20)] * 3 + [("WARMUP", 90), ("RECORD", 30), ("RECORD", 30),
                                                                 ("RECORD_AND_SAVE", 32)]
    summary = _timed(steps).summary()
    assert summary == StepTimes(profiled_median_ns=30 * MS, unprofiled_median_ns=20 * MS,
                                profiled_steps=3, unprofiled_steps=3)


def test_no_summary_without_both_kinds():
    assert _timed([("NONE", 20)] * 6).summary() is None
    assert _timed([("RECORD", 20)] * 6).summary() is None
    assert StepTimer().summary() is None


def test_unprofiled_steps_after_the_last_window_are_not_compared():
    """A trainer profiles steps 5-7 and steps on; the later steps ran faster once warm (issue 34: a Hugging
    Face run read "profiling made steps 1324% slower"). Like with like: the steps before the window."""
    before, window, later = [("NONE", 20)] * 3, [("RECORD", 30)] * 2 + [("RECORD_AND_SAVE", 30)], [("NONE", 2)] * 40
    summary = _timed([("NONE", 500)] * COLD_STEPS + before + window + later).summary()
    assert summary == StepTimes(profiled_median_ns=30 * MS, unprofiled_median_ns=20 * MS,
                                profiled_steps=3, unprofiled_steps=3)
    # Only later steps to compare with: nothing like, so nothing to say.
    assert _timed([("NONE", 500)] * COLD_STEPS + window + later).summary() is None
    # Steps between two windows are as like as those before the first one.
    between = _timed([("NONE", 500)] * COLD_STEPS + before + window + [("NONE", 26)] * 3 + window + later)
    assert between.summary().unprofiled_steps == 6


def test_a_capture_that_counted_later_steps_gets_no_note():
    """Captures written before the fix counted every unprofiled step: more than there are steps up to the
    last profiled one gives it away."""
    old = {"profiled_median_ns": 114 * MS, "unprofiled_median_ns": 8 * MS, "profiled_steps": 3,
           "unprofiled_steps": 400}
    assert profiling_cost_note(old, last_profiled_step=7) is None
    assert profiling_cost_note({**old, "unprofiled_steps": 3}, last_profiled_step=7).startswith(
        "profiling made steps 1325% slower")


def test_the_advisor_says_so_when_profiling_slowed_steps():
    note = profiling_cost_note({"profiled_median_ns": 31 * MS, "unprofiled_median_ns": 24 * MS,
                                "profiled_steps": 5, "unprofiled_steps": 3})
    assert note.startswith("profiling made steps 29% slower") and "tiny ops" in note
    # Under 10%, or figures missing or malformed: nothing to say.
    assert profiling_cost_note({"profiled_median_ns": 26 * MS, "unprofiled_median_ns": 24 * MS,
                                "profiled_steps": 5, "unprofiled_steps": 3}) is None
    assert profiling_cost_note(None) is None
    assert profiling_cost_note({"profiled_median_ns": "x"}) is None


LATER_FASTER = """\
import sys, time
import torch
import mlprof

with mlprof.profile(activities=[mlprof.ProfilerActivity.CPU],
                    schedule=mlprof.schedule(wait=0, warmup=1, active=3, repeat=1),
                    on_trace_ready=mlprof.tensorboard_trace_handler(sys.argv[1], analyse_flag=False)) as prof:
    for step in range(40):
        torch.ones(64).sum()
        if step < 8:
            time.sleep(0.03)  # the job's first steps are slow (warming up); the window falls among them
        prof.step()
"""


@pytest.mark.long  # real `mlprof run`s; CI's 20 minutes (2026-11-28: a fresh clone took 1,204 s)
def test_a_real_run_whose_unprofiled_steps_are_later_faster_steps_gets_no_note(tmp_path):
    import json
    import subprocess
    import sys

    import pytest

    pytest.importorskip("torch")
    script = tmp_path / "later_faster.py"
    script.write_text(LATER_FASTER)
    done = subprocess.run([sys.executable, str(script), str(tmp_path / "out")], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    (capture,) = (tmp_path / "out").glob("*_mlprof")
    info = json.loads((capture / "profiler_info.json").read_text())
    # Window steps 1-3 among the slow early steps (0 and 1 cold); every unprofiled step came after it.
    assert info["windows"] and info["step_times"] is None
    advice = subprocess.run([sys.executable, "-m", "mlprof", "advise", str(capture), "--json", "--no-write"],
                            capture_output=True, text=True, timeout=300)
    assert advice.returncode == 0, advice.stderr[-2000:]
    reports = json.loads(advice.stdout)
    reports = reports if isinstance(reports, list) else [reports]
    assert reports and not [n for r in reports for n in r["notes"] if "profiling made steps" in n]
