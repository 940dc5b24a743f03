"""Windows sized by evidence (`mlprof run`'s default, ``--active auto``): how many steps a window records.

The schedule is driven with a fake clock: no test here depends on how fast this machine runs.
"""

from __future__ import annotations

import itertools

import pytest

from mlprof.errors import ConfigError
from mlprof.settings.options import AUTO_ACTIVE
from mlprof.settings.schedule import (MIN_STEPS, RECOMMENDED_STEPS, WINDOW_TARGETS, ProfilerAction, WindowTargets,
                             evidence_schedule, schedule)

MS = 1_000_000


class FakeClock:
    def __init__(self) -> None:
        self.now_ns = 0

    def __call__(self) -> int:
        return self.now_ns


def drive(sched, step_ms, steps: int = 2000, asks: int = 2) -> list[str]:
    """The action of each step, each asked ``asks`` times (torch and mlprof both ask), steps of ``step_ms``."""
    clock = sched._clock
    actions = []
    for step in range(steps):
        answers = {sched(step).name for _ in range(asks)}
        assert len(answers) == 1, f"step {step} answered {answers}"
        actions.append(answers.pop())
        clock.now_ns += int((step_ms(step) if callable(step_ms) else step_ms) * MS)
    return actions


def windows(actions: list[str]) -> list[list[int]]:
    out, current = [], []
    for step, action in enumerate(actions):
        if action.startswith("RECORD"):
            current.append(step)
        if action == "RECORD_AND_SAVE":
            out.append(current)
            current = []
    return out


@pytest.mark.parametrize("step_ms, expected_steps", [
    (1, 200),      # tiny steps: capped at max_steps
    (10, 200),     # 2 s of steps needs 200 of them
    (50, 40),      # 2 s
    (100, 20),     # both targets at once
    (500, 20),     # 20 steps: compare's recommended count
    (5_000, 12),   # 60 s cap once 5 steps are in
    (20_000, 5),   # long steps: the fewest compare decides on
    (90_000, 4),   # very long steps: the hard cap, under 5 steps
])
def test_a_window_records_until_its_steps_are_evidence_enough(step_ms, expected_steps):
    sched = evidence_schedule(warmup=1, skip_first=5, repeat=1, clock=FakeClock())
    actions = drive(sched, step_ms, steps=400)
    assert actions[:5] == ["NONE"] * 5 and actions[5] == "WARMUP"
    (window,) = windows(actions)
    assert window[0] == 6 and len(window) == expected_steps
    assert sched.finished and set(actions[window[-1] + 1:]) == {"NONE"}


def test_targets_follow_compare_and_the_sampler():
    assert WINDOW_TARGETS.steps == RECOMMENDED_STEPS and WINDOW_TARGETS.min_steps == MIN_STEPS
    # 2 s of steps at the sampler's default 10 ms period: about 200 stack samples, well over 100.
    assert WINDOW_TARGETS.duration_ns >= 100 * 10 * MS


def test_cycles_repeat_like_torch_schedule_with_windows_of_their_own_length():
    # Steps that slow down: the first window (fast steps) is longer than the second.
    sched = evidence_schedule(wait=2, warmup=1, repeat=2, skip_first=3, clock=FakeClock())
    actions = drive(sched, lambda step: 50 if step < 60 else 400, steps=300)
    first, second = windows(actions)
    assert first[0] == 3 + 2 + 1 and len(first) == 40
    assert second[0] == first[-1] + 1 + 2 + 1 and len(second) == 20
    assert actions[first[-1] + 1:first[-1] + 3] == ["NONE", "NONE"] and actions[first[-1] + 3] == "WARMUP"
    assert sched.finished


def test_repeat_zero_records_until_the_job_ends():
    sched = evidence_schedule(repeat=0, clock=FakeClock())
    assert len(windows(drive(sched, 100, steps=205))) == 10 and not sched.finished


def test_fixed_windows_keep_torch_semantics():
    # The API's schedule is unchanged: `active` steps, exactly.
    for wait, warmup, active in itertools.product(range(2), range(2), (1, 3)):
        fixed = schedule(wait=wait, warmup=warmup, active=active, repeat=1)
        acts = [fixed(s).name for s in range(20)]
        assert sum(a.startswith("RECORD") for a in acts) == active


def test_a_custom_target_is_checked_step_by_step():
    targets = WindowTargets(steps=3, duration_ns=0, min_steps=1, max_steps=10)
    sched = evidence_schedule(targets=targets, clock=FakeClock())
    assert [sched(s) for s in range(4)] == [ProfilerAction.RECORD, ProfilerAction.RECORD,
                                            ProfilerAction.RECORD_AND_SAVE, ProfilerAction.NONE]


def test_bad_cycles_are_refused():
    with pytest.raises(ConfigError, match="schedule: wait"):
        evidence_schedule(wait=-1)
    with pytest.raises(ConfigError, match="step must be >= 0"):
        evidence_schedule()(-1)


def test_run_options_take_auto_by_default_and_numbers_still():
    from mlprof.collect.profile_builder import run_schedule
    from mlprof.collect.run_options import RunOptions

    assert RunOptions().active == AUTO_ACTIVE
    assert isinstance(run_schedule(RunOptions()), evidence_schedule)
    assert RunOptions(active="AUTO").active == AUTO_ACTIVE and RunOptions(active="7").active == 7
    fixed = run_schedule(RunOptions(active=3))
    assert isinstance(fixed, schedule) and fixed.active == 3
    for bad in (0, "soon", 1.5, True):
        with pytest.raises(ConfigError, match="active"):
            RunOptions(active=bad)


def test_trainer_numbering_keeps_what_each_schedule_says_about_finishing():
    # A trainer's steps count from 1 (profile_builder._CountedFromOne). A fixed schedule has no "finished": the
    # automatic profiler then counts its cycles; a False here kept such a profiler open to the job's end.
    from mlprof.collect.profile_builder import _CountedFromOne

    assert _CountedFromOne(schedule(wait=0, warmup=0, active=2)).finished is None
    targets = WindowTargets(steps=3, duration_ns=0, min_steps=1, max_steps=10)  # three steps make a window
    sized = _CountedFromOne(evidence_schedule(targets=targets, clock=FakeClock()))
    assert [sized(1), sized(2)] == [ProfilerAction.RECORD, ProfilerAction.RECORD] and sized.finished is False
    # Finished from the step it saves with, which is still to be recorded: only the next step answers NONE
    # (the automatic profiler stops there, not at the saving step's start).
    assert sized(3) is ProfilerAction.RECORD_AND_SAVE and sized.finished is True
    assert sized(3) is ProfilerAction.RECORD_AND_SAVE and sized(4) is ProfilerAction.NONE
