"""Profiled vs unprofiled step times: what profiling costs the job, and the advisor's sentence about it."""

from __future__ import annotations

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


def test_the_advisor_says_so_when_profiling_slowed_steps():
    note = profiling_cost_note({"profiled_median_ns": 31 * MS, "unprofiled_median_ns": 24 * MS,
                                "profiled_steps": 5, "unprofiled_steps": 3})
    assert note.startswith("profiling made steps 29% slower") and "tiny ops" in note
    # Under 10%, or figures missing or malformed: nothing to say.
    assert profiling_cost_note({"profiled_median_ns": 26 * MS, "unprofiled_median_ns": 24 * MS,
                                "profiled_steps": 5, "unprofiled_steps": 3}) is None
    assert profiling_cost_note(None) is None
    assert profiling_cost_note({"profiled_median_ns": "x"}) is None
