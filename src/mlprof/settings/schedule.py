"""Which steps to record: torch.profiler.schedule's semantics, without torch.

Kept torch-free so the dynamic-profiling watcher and the CLI can reason about
windows on any machine; ``mlprof.collect`` maps the actions onto torch's.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable
from dataclasses import dataclass

from mlprof.errors import ConfigError
from mlprof.settings.options import AUTO_ACTIVE, check_int

__all__ = ["ProfilerAction", "schedule", "evidence_schedule", "WindowTargets", "WINDOW_TARGETS", "MIN_STEPS",
           "RECOMMENDED_STEPS"]

# Below this many steps per run compare gives no verdict (with 3 vs 3 steps not even a perfect
# separation reaches 95% confidence: its chance under "no change" is 1/10).
MIN_STEPS = 5
# Enough steps per run to resolve changes of a few percent on a noisy host.
RECOMMENDED_STEPS = 20


class ProfilerAction(enum.Enum):
    """What the profiler does during a step (same members as torch's)."""

    NONE = 0
    WARMUP = 1
    RECORD = 2
    RECORD_AND_SAVE = 3


@dataclass(frozen=True)
class schedule:  # noqa: N801 - lower-case to stay a drop-in for torch.profiler.schedule
    """A step -> ProfilerAction function, as ``torch.profiler.schedule``.

    The first ``skip_first`` steps are ignored; then each cycle waits ``wait``
    steps, warms up for ``warmup`` steps and records ``active`` steps, the last
    of which saves the window. ``repeat`` cycles run (0 = until the job ends).
    """

    wait: int
    active: int
    warmup: int = 0
    repeat: int = 0
    skip_first: int = 0

    def __post_init__(self) -> None:
        for name, minimum in (("wait", 0), ("active", 1), ("warmup", 0), ("repeat", 0), ("skip_first", 0)):
            check_int(getattr(self, name), f"schedule: {name}", minimum)

    def __call__(self, step: int) -> ProfilerAction:
        if step < 0:
            raise ConfigError(f"schedule: step must be >= 0, got {step}")
        if step < self.skip_first:
            return ProfilerAction.NONE
        step -= self.skip_first
        cycle = self.wait + self.warmup + self.active
        if self.repeat > 0 and step // cycle >= self.repeat:
            return ProfilerAction.NONE
        pos = step % cycle
        if pos < self.wait:
            return ProfilerAction.NONE
        if pos < self.wait + self.warmup:
            return ProfilerAction.WARMUP
        return ProfilerAction.RECORD_AND_SAVE if pos == cycle - 1 else ProfilerAction.RECORD


def always_record(_step: int) -> ProfilerAction:
    """The schedule used without one: record every step in a single window."""
    return ProfilerAction.RECORD


@dataclass(frozen=True)
class WindowTargets:
    """When a window sized by evidence (``active="auto"``) has recorded enough.

    A window ends after the step at which both targets are met: ``steps`` steps
    (so that ``mlprof compare`` resolves a change of a few percent:
    ``analysis.stats.RECOMMENDED_STEPS``) and ``duration_ns`` of recorded steps
    (so that the Python stack sampler, every 10 ms by default, takes about 200
    samples: a call site's share rests on more than a handful). Caps keep a
    window of tiny steps or of very long ones bounded: ``max_steps`` steps, or
    ``max_duration_ns`` once ``min_steps`` (the fewest steps compare decides on:
    ``analysis.stats.MIN_STEPS``) are in, or ``hard_max_duration_ns`` whatever
    the count.
    """

    steps: int = RECOMMENDED_STEPS
    duration_ns: int = 2_000_000_000
    min_steps: int = MIN_STEPS
    max_steps: int = 200
    max_duration_ns: int = 60_000_000_000
    hard_max_duration_ns: int = 300_000_000_000

    def is_last(self, steps_with_this: int, projected_ns: float) -> bool:
        """Whether the step now starting, the ``steps_with_this``-th of its window, ends the window.

        ``projected_ns``: the window's recorded time once this step ends (elapsed + mean step so far).
        """
        if steps_with_this >= self.max_steps or projected_ns >= self.hard_max_duration_ns:
            return True
        if steps_with_this >= self.steps and projected_ns >= self.duration_ns:
            return True
        return steps_with_this >= self.min_steps and projected_ns >= self.max_duration_ns


WINDOW_TARGETS = WindowTargets()


class evidence_schedule:  # noqa: N801 - a schedule, like schedule above
    """``schedule``'s cycles (skip_first, wait, warmup, repeat) with windows that record until their
    steps are evidence enough (:class:`WindowTargets`) instead of a fixed ``active`` count.

    Stateful: it reads the clock when asked for a step's action (torch asks at each ``step()``, the
    boundary between two steps) and answers the same step the same way when asked again.
    """

    def __init__(self, wait: int = 0, warmup: int = 0, repeat: int = 1, skip_first: int = 0,
                 targets: WindowTargets = WINDOW_TARGETS, clock: Callable[[], int] = time.perf_counter_ns) -> None:
        for name, value in (("wait", wait), ("warmup", warmup), ("repeat", repeat), ("skip_first", skip_first)):
            check_int(value, f"schedule: {name}", 0)
        self.wait, self.warmup, self.repeat, self.skip_first = wait, warmup, repeat, skip_first
        self.active = AUTO_ACTIVE
        self.targets = targets
        self._clock = clock
        self._cycle_start = skip_first
        self._record_start: tuple[int, int] | None = None  # (first recorded step, clock then)
        self.windows_done = 0
        self._answered: dict[int, ProfilerAction] = {}

    @property
    def finished(self) -> bool:
        """Every window of ``repeat`` has been recorded (never with repeat=0)."""
        return bool(self.repeat) and self.windows_done >= self.repeat

    def __call__(self, step: int) -> ProfilerAction:
        if step < 0:
            raise ConfigError(f"schedule: step must be >= 0, got {step}")
        known = self._answered.get(step)
        if known is None:
            known = self._decide(step)
            # Steps only move forward: the last few answers are all that is asked again.
            if len(self._answered) > 8:
                self._answered.clear()
            self._answered[step] = known
        return known

    def _decide(self, step: int) -> ProfilerAction:
        if step < self._cycle_start or self.finished:
            return ProfilerAction.NONE
        pos = step - self._cycle_start
        if pos < self.wait:
            return ProfilerAction.NONE
        if pos < self.wait + self.warmup:
            return ProfilerAction.WARMUP
        now = self._clock()
        if self._record_start is None:
            self._record_start = (step, now)
        first, started = self._record_start
        done = step - first  # steps of this window already recorded
        elapsed = now - started
        projected = elapsed + (elapsed / done if done else 0)
        if (done or self.targets.max_steps <= 1) and self.targets.is_last(done + 1, projected):
            self.windows_done += 1
            self._cycle_start = step + 1
            self._record_start = None
            return ProfilerAction.RECORD_AND_SAVE
        return ProfilerAction.RECORD
