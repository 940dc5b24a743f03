"""Monitor mode: every step of the job timed cheaply, detailed windows opened where the steps go wrong.

``mlprof run --monitor`` / ``ExperimentalConfig(monitor=True)``. Between
windows the profiler is off (the schedule says NONE); per step the monitor
reads the clock, the stepping thread's schedstat (its time on a CPU and its
wait for a core: the same reading as a window's steps, ``thread_cpu_ns`` and
``cpu_wait_ns``), the DataLoader time and GC pauses counted since the last
step, and every ``RSS_EVERY`` steps the process's RSS, then appends one
record to the capture's series (:mod:`mlprof.capture.job_series`, bounded).

This object is also the profile's schedule: a baseline window opens after
``BASELINE_AT_STEP`` steps, and a window opens after any step on which
:class:`~mlprof.collect.monitor_triggers.Triggers` fires, sized by evidence
(:class:`mlprof.settings.schedule.evidence_schedule`, one warm-up step, then
``MONITOR_TARGETS``), at most ``max_windows`` in all, none while the capture
holds ``DISK_LIMIT_BYTES``, and the same reason not again within
``COOLDOWN_STEPS`` steps of its last window (a periodic stall would otherwise
spend every window on itself). Nothing here imports torch.
"""

from __future__ import annotations

import gc
import logging
import os
import sys
import time
from pathlib import Path
from typing import Any

from ..capture.job_series import DEFAULT_CAP_RECORDS, MONITOR_FILE, SERIES_FILE, TRIGGERS, SeriesWriter
from ..settings.schedule import ProfilerAction, WindowTargets, evidence_schedule
from .storage import dir_size_bytes
from .monitor_triggers import Triggers
from .schedstat import on_cpu_and_delay_ns, open_schedstat

__all__ = ["JobMonitor", "MONITOR_TARGETS", "BASELINE_AT_STEP", "DEFAULT_MAX_WINDOWS"]

logger = logging.getLogger("mlprof")

# The baseline window opens once the job's first steps (allocations, compilation) are behind it.
BASELINE_AT_STEP = 5
DEFAULT_MAX_WINDOWS = 5  # the baseline window and four triggered ones
COOLDOWN_STEPS = 500
DISK_LIMIT_BYTES = 2 << 30
RSS_EVERY = 8
# Between windows, steps shorter than BATCH_NS / 2 share one reading of schedstat (and of RSS) over about
# BATCH_NS, at most MAX_BATCH_STEPS steps: right after a torch step the first system call meets cold caches
# (20 us for the schedstat read, 1% of a 2 ms step; docs/monitor.md "Cost"). Steps of BATCH_NS or more are
# read one by one.
BATCH_NS = 100_000_000
MAX_BATCH_STEPS = 128
# Smaller than a plain run's windows: a monitor window is one of several, and 20 steps of a repeating
# stall hold several of its occurrences.
MONITOR_TARGETS = WindowTargets(steps=20, duration_ns=1_000_000_000, min_steps=5, max_steps=50,
                                max_duration_ns=20_000_000_000, hard_max_duration_ns=120_000_000_000)
_CODES = {reason: code for code, reason in TRIGGERS.items()}
_PAGE_BYTES = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096

# DataLoader time of this process, ns (one hook per process, whatever the number of monitors).
_data_ns = [0]
_data_hooked = [False]


def _hook_dataloader() -> None:
    if _data_hooked[0]:
        return
    _data_hooked[0] = True
    from .import_hooks import after_import

    def patch(module) -> None:  # noqa: ANN001
        base = module._BaseDataLoaderIter
        original = base.__next__
        clock = time.perf_counter_ns

        def __next__(self):  # noqa: ANN001, N807
            t0 = clock()
            try:
                return original(self)
            finally:
                _data_ns[0] += clock() - t0

        base.__next__ = __next__

    after_import("torch.utils.data.dataloader", patch)


class JobMonitor:
    def __init__(self, max_windows: int = DEFAULT_MAX_WINDOWS, cap_records: int = DEFAULT_CAP_RECORDS,
                 baseline_at: int = BASELINE_AT_STEP) -> None:
        self.max_windows = max_windows
        self.cap_records = cap_records
        self.baseline_at = baseline_at
        self.triggers = Triggers()
        self.windows: list[dict[str, Any]] = []  # each opened window: reason, detail, trigger_step, first_step
        self.skipped: list[dict[str, Any]] = []  # triggers that found no window left (limits)
        self._writer: SeriesWriter | None = None
        self._capture: Path | None = None
        self._fd: int | None = None
        self._statm: int | None = None
        self.gc_ns = 0  # GC pauses of this process so far, ns
        self._gc_t0 = 0
        # The fast path (profiler.step() between windows): steps left before the next full boundary, and
        # each fast boundary's (time, DataLoader ns, GC ns) since the last one.
        self.fast_left = 0
        self.marks: list[tuple[int, int, int]] = []
        self.data_ns = _data_ns
        self.batched_steps = 0  # steps whose CPU time and wait are shares of one reading
        self.max_batch_steps = 1
        self._rss = -1
        self._start: tuple | None = None
        self._last_read: tuple[int | None, int | None] | None = None
        self._pending: tuple[str, str, int] | None = None
        self._window: evidence_schedule | None = None
        self._judge_from: int | None = None  # steps judged once the baseline window is done
        self._last_by_reason: dict[str, int] = {}
        self.steps = 0

    # -- the profile's schedule -------------------------------------------------------
    @property
    def finished(self) -> bool:
        """Never: the monitor runs until the job ends (mlprof run's automatic profiler asks)."""
        return False

    def __call__(self, step: int) -> ProfilerAction:
        if self._window is None:
            if self._pending is None and not self.windows and step >= self.baseline_at:
                self._pending = ("baseline", "the job's early steps, for comparison", step - 1)
            if self._pending is not None:
                self._open_window(step)
        window = self._window
        if window is None:
            return ProfilerAction.NONE
        action = window(step)
        if action is ProfilerAction.NONE and window.finished:
            self._window = None
            self.windows[-1]["last_step"] = step - 1
            self.triggers.reset_after_window()
            if self._judge_from is None:
                self._judge_from = step
        return action

    def _open_window(self, step: int) -> None:
        reason, detail, trigger_step = self._pending
        self._pending = None
        why = None
        if len(self.windows) >= self.max_windows:
            why = f"all {self.max_windows} windows used"
        elif self._capture is not None and dir_size_bytes(self._capture) >= DISK_LIMIT_BYTES:
            why = f"the capture holds {DISK_LIMIT_BYTES >> 30} GiB"
        if why:
            self.skipped.append({"reason": reason, "detail": detail, "trigger_step": trigger_step, "why": why})
            return
        self._window = evidence_schedule(warmup=1, repeat=1, skip_first=step, targets=MONITOR_TARGETS)
        self.windows.append({"reason": reason, "detail": detail, "trigger_step": trigger_step,
                             "first_step": step + 1, "last_step": None})
        self._last_by_reason[reason] = step

    # -- per step ---------------------------------------------------------------------
    def open(self, capture: Path) -> None:
        """Start the series in ``capture`` (on the training thread: its schedstat is read)."""
        self._capture = Path(capture)
        self._writer = SeriesWriter(self._capture / SERIES_FILE, self.cap_records)
        self._fd = open_schedstat()
        try:
            self._statm = os.open("/proc/self/statm", os.O_RDONLY)
        except OSError:
            self._statm = None
        gc.callbacks.append(self._on_gc)
        _hook_dataloader()

    def begin(self, step: int, now_ns: int, action: object, batchable: bool = False) -> None:
        """Step ``step`` starts; ``batchable``: the profiler's step path has nothing to do on the next steps but
        time them (no window, torch idle), so they may take the fast path (``fast_left``, ``marks``)."""
        if self._writer is None:
            return
        on_cpu, wait = self._last_read or on_cpu_and_delay_ns(self._fd)
        self._last_read = None
        name = getattr(action, "name", "NONE")
        covered = 1 if name.startswith("RECORD") else 2 if name == "WARMUP" else 0
        self._start = (step, now_ns, on_cpu, wait, _data_ns[0], self.gc_ns, covered)
        if batchable and not covered and self._window is None and self._pending is None \
                and self._judge_from is not None and step >= self._judge_from:
            self.fast_left = self._batch_steps() - 1

    def _batch_steps(self) -> int:
        """How many steps share one reading of the thread's CPU time and wait: enough to span ``BATCH_NS``."""
        median = self.triggers.median_ns
        if not median:
            return 1
        return max(1, min(MAX_BATCH_STEPS, int(BATCH_NS // median)))

    def end(self, now_ns: int) -> None:
        """The step begun at ``begin`` ends now, with the steps the fast path marked since (``marks``): one
        reading of schedstat for them all, its CPU time and wait shared out in proportion to each step's wall
        time, each step then judged and recorded as if alone."""
        self._end((now_ns, _data_ns[0], self.gc_ns))

    def _end(self, last: tuple[int, int, int]) -> None:
        now_ns = last[0]
        start, self._start = self._start, None
        marks, self.marks = self.marks, []
        self.fast_left = 0
        if start is None or self._writer is None:
            return
        step, start_ns, on0, wait0, data0, gc0, covered = start
        on1, wait1 = self._last_read = on_cpu_and_delay_ns(self._fd)
        cpu = -1 if on0 is None or on1 is None else on1 - on0
        wait = -1 if wait0 is None or wait1 is None else wait1 - wait0
        if marks:  # a batch: one reading of RSS for it, and its CPU time and wait shared out below
            self._rss = self._read_rss()
            self.batched_steps += len(marks) + 1
            self.max_batch_steps = max(self.max_batch_steps, len(marks) + 1)
        elif self.steps % RSS_EVERY == 0:
            self._rss = self._read_rss()
        rss = self._rss
        marks.append(last)
        span = max(now_ns - start_ns, 1)
        judge = not covered and self._judge_from is not None and step >= self._judge_from and self._window is None
        rows = []
        t0, d0, g0 = start_ns, data0, gc0
        for i, (t, d, g) in enumerate(marks):
            # Cumulative shares: the steps' CPU times and waits add up to the batch's exactly (a step alone
            # gets all of it).
            before, after = t0 - start_ns, t - start_ns
            wall = t - t0
            step_cpu = -1 if cpu < 0 else cpu * after // span - cpu * before // span
            step_wait = -1 if wait < 0 else wait * after // span - wait * before // span
            trigger = 0
            if judge and self._pending is None:
                found = self.triggers.observe(step + i, wall, step_wait, rss)
                if found is not None:
                    trigger = self._pend(found, step + i)
            rows.append((step + i, 1, t0, wall, step_cpu, step_wait, d - d0, g - g0, rss, covered, trigger))
            t0, d0, g0 = t, d, g
        self.steps += len(rows)
        self._writer.add_rows(rows)

    def _pend(self, found: tuple[str, str], step: int) -> int:
        """A trigger found at ``step``: the window is pending (opens at the next boundary) unless the same reason
        opened one within ``COOLDOWN_STEPS``; the trigger's code for the series (0: none)."""
        if step - self._last_by_reason.get(found[0], -COOLDOWN_STEPS) < COOLDOWN_STEPS:
            return 0
        self._pending = (*found, step)
        return _CODES[found[0]]

    def _read_rss(self) -> int:
        if self._statm is None:
            return -1
        try:
            return int(os.pread(self._statm, 64, 0).split()[1]) * _PAGE_BYTES
        except (OSError, ValueError, IndexError):
            return -1

    def _on_gc(self, phase: str, _info: dict) -> None:
        # Inside the interpreter's collector: two clock reads, no allocation worth the name.
        if phase == "start":
            self._gc_t0 = time.perf_counter_ns()
        elif self._gc_t0:
            self.gc_ns += time.perf_counter_ns() - self._gc_t0
            self._gc_t0 = 0

    def close(self) -> dict[str, Any] | None:
        """Finish the series; writes and returns what job_monitor.json holds (None when never opened)."""
        if self.marks and self._start is not None:  # steps the fast path timed before the job stopped
            self._end(self.marks.pop())
        self.fast_left = 0
        writer, self._writer = self._writer, None
        if self._on_gc in gc.callbacks:
            gc.callbacks.remove(self._on_gc)
        for fd in (self._fd, self._statm):
            if fd is not None:
                os.close(fd)
        self._fd = self._statm = None
        if writer is None:
            return None
        writer.close()
        info = {"steps": self.steps, "cap_records": writer.cap, "records": writer.records_on_disk,
                "steps_per_record": writer.stride, "compactions": writer.compactions,
                "max_windows": self.max_windows, "batched_steps": self.batched_steps,
                "max_batch_steps": self.max_batch_steps, "windows": self.windows, "skipped": self.skipped}
        from ..capture.files import write_json_atomic

        write_json_atomic(self._capture / MONITOR_FILE, info)
        return info


if sys.platform != "linux":  # pragma: no cover - schedstat and statm are Linux's
    RSS_EVERY = 1 << 30
