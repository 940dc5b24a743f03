"""Step wall times inside and outside the profiled windows: what profiling costs the job it observes.

Every ``step()`` call closes one step. A step is timed from the end of the
previous ``step()`` call (after mlprof saved a window, if it did) to the start
of this one, so mlprof's own saving is never in it, and classed by the
schedule's action during it: ``RECORD``/``RECORD_AND_SAVE`` (profiled) or
``NONE`` (not profiled; warm-up steps, whose tracing runs but is thrown away,
are neither). The first ``COLD_STEPS`` steps never count: they are cold
(allocations, compilation, caches). Under ``mlprof run`` the unprofiled steps
are those of ``--skip-first`` after them (the profiler stops after its last
window), so ``--skip-first 5`` (the default) gives three.

Only unprofiled steps before the last profiled one are compared: like with
like. A trainer callback profiles steps 5-7 and keeps stepping for thousands
more, which run faster once the job has warmed up (a Hugging Face run's later
steps made its profiled ones look 1324% slower). When no unprofiled step
precedes a profiled one, there is nothing like to compare with, and no summary.

At stop the medians go into the manifest (``profiler_info.json``,
``step_times``), and the advisor says how much slower profiled steps were.
About 0.4 us a step (end + begin, measured), and a bounded list.
"""

from __future__ import annotations

import statistics

from ..capture.records import StepTimes

__all__ = ["StepTimer", "MAX_STEPS", "COLD_STEPS"]

# Steps kept per kind: a long job's medians need no more.
MAX_STEPS = 10_000
# The job's first steps, never compared: cold.
COLD_STEPS = 2


class StepTimer:
    def __init__(self) -> None:
        self.profiled_ns: list[int] = []
        self.unprofiled_ns: list[int] = []
        self._start: tuple[int, str] | None = None  # (start_ns, the action's name during the step)
        self._ended = 0
        self.last_end_ns: int | None = None  # when the last step ended (cold ones included)
        self._unprofiled_before = 0  # how many of unprofiled_ns came before a profiled step

    def end(self, now_ns: int) -> None:
        """The step that started at the last ``begin`` ends now."""
        start, self._start = self._start, None
        if start is None:
            return
        self.last_end_ns = now_ns
        start_ns, action = start
        self._ended += 1
        if self._ended <= COLD_STEPS:
            return
        if action.startswith("RECORD"):
            if len(self.profiled_ns) < MAX_STEPS:
                self.profiled_ns.append(now_ns - start_ns)
            self._unprofiled_before = len(self.unprofiled_ns)
        elif action == "NONE" and len(self.unprofiled_ns) < MAX_STEPS:
            self.unprofiled_ns.append(now_ns - start_ns)

    def idle_steps(self, ends_ns: list[int]) -> None:
        """Steps under NONE, ending one after the other at ``ends_ns``, each starting where the last ended (monitor
        mode's fast path hands them over in batches): ``end`` then ``begin(end, None)`` for each."""
        for end_ns in ends_ns:
            self.end(end_ns)
            self.begin(end_ns, None)

    def begin(self, now_ns: int, action: object) -> None:
        """A step starts at ``now_ns``, under the schedule's ``action`` (a ProfilerAction, or None when off)."""
        self._start = (now_ns, getattr(action, "name", "NONE"))

    def summary(self) -> StepTimes | None:
        """Medians and counts, the manifest's typed record; None until a profiled step has an unprofiled
        one before it (the steps after the last window are left out: see the module doc)."""
        unprofiled = self.unprofiled_ns[:self._unprofiled_before]
        if not self.profiled_ns or not unprofiled:
            return None
        return StepTimes(profiled_median_ns=int(statistics.median(self.profiled_ns)),
                         unprofiled_median_ns=int(statistics.median(unprofiled)),
                         profiled_steps=len(self.profiled_ns), unprofiled_steps=len(unprofiled))
