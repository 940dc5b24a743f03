"""Which steps to record: torch.profiler.schedule's semantics, without torch.

Kept torch-free so the dynamic-profiling watcher and the CLI can reason about
windows on any machine; ``mlprof.collect`` maps the actions onto torch's.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from .errors import ConfigError
from .options import check_int

__all__ = ["ProfilerAction", "schedule"]


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
