"""Which steps to record: torch.profiler.schedule's semantics, without torch.

Kept torch-free so the dynamic-profiling watcher and the CLI can reason about
windows on any machine; ``mlprof.collect`` maps the actions onto torch's.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from .errors import ConfigError

__all__ = ["ProfilerAction", "schedule"]


class ProfilerAction(enum.Enum):
    """What the profiler does during a step (same members as torch's)."""

    NONE = 0
    WARMUP = 1
    RECORD = 2
    RECORD_AND_SAVE = 3


def _check_count(name: str, value: object, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(f"schedule: {name} must be an integer >= {minimum}, got {value!r}")
    return value


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
        _check_count("wait", self.wait, 0)
        _check_count("active", self.active, 1)
        _check_count("warmup", self.warmup, 0)
        _check_count("repeat", self.repeat, 0)
        _check_count("skip_first", self.skip_first, 0)

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
