"""In-memory buffers for what mlprof records itself during a capture window.

Steps, mstx markers and GC pauses are timed here with ``time.time_ns()``, the
wall clock Kineto uses, so the parser can merge them with the Kineto trace
without any offset. Nothing here imports torch.

Per event only a small dict is appended (the hot path); ``files()`` turns a
window's lists into the typed records of :mod:`mlprof.capture.records` once,
at window end, and the writer encodes those.
"""

from __future__ import annotations

import gc
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from mlprof.collect.schedstat import on_cpu_and_delay_ns, open_schedstat


__all__ = ["HostRecorder", "active_recorder", "range_record"]


@dataclass
class OpenRange:
    range_id: int
    name: str
    start_ns: int
    tid: int
    stream: Any = None
    device_start: Any = None  # a torch.cuda.Event when a stream was given


@dataclass
class HostRecorder:
    """What one window records outside torch.profiler.

    ``gc_threshold_ns`` is None when GC detection is off.
    """

    record_markers: bool = True
    gc_threshold_ns: int | None = None
    steps: list[dict[str, int]] = field(default_factory=list)
    marks: list[dict[str, Any]] = field(default_factory=list)
    ranges: list[dict[str, Any]] = field(default_factory=list)
    gc_pauses: list[dict[str, Any]] = field(default_factory=list)
    # Window files recorded beside this recorder (python_samples, modules), by files() key:
    # their dicts (StackSampler/ModuleRecorder.to_json()) or records.
    attribution: dict[str, Any] = field(default_factory=dict)
    # step, start_ns, then at its start: process CPU ns, the thread's wait ns, the thread's on-CPU ns
    _current_step: tuple[int, int, int, int | None, int | None] | None = None
    _cpu_clock: "StepCpuClock | None" = None
    _gc_start_ns: int = 0
    _device: Any = None  # mlprof.collect.device_markers.DeviceRangeTimer, lazily

    # -- steps ---------------------------------------------------------------
    def begin_step(self, step: int, ts_ns: int) -> None:
        if self._cpu_clock is None:
            self._cpu_clock = StepCpuClock()
        self._current_step = (step, ts_ns, *self._cpu_clock.read())

    def end_step(self, ts_ns: int, partial: bool = False) -> None:
        """The current step ends at ``ts_ns``; ``partial``: it was cut there by the profiler's stop."""
        if self._current_step is not None:
            step, start_ns, cpu0, wait0, run0 = self._current_step
            cpu1, wait1, run1 = self._cpu_clock.read() if self._cpu_clock is not None else (cpu0, None, None)
            self.steps.append({"step": step, "start_ns": start_ns, "end_ns": ts_ns, "cpu_ns": cpu1 - cpu0,
                               "cpu_wait_ns": None if wait0 is None or wait1 is None else wait1 - wait0,
                               "thread_cpu_ns": None if run0 is None or run1 is None else run1 - run0,
                               "partial": partial})
            self._current_step = None

    def record_speed_probe(self, cpu_ns: int) -> None:
        """The host-speed probe run right after the last step ended (collect/speed_probe.py)."""
        if self.steps:
            self.steps[-1]["speed_probe_ns"] = cpu_ns

    def step_range(self) -> tuple[int | None, int | None]:
        if not self.steps:
            return None, None
        return self.steps[0]["step"], self.steps[-1]["step"]

    # -- GC ------------------------------------------------------------------
    def _on_gc(self, phase: str, info: dict[str, int]) -> None:
        # Runs inside the interpreter's collector: keep it allocation-light.
        if phase == "start":
            self._gc_start_ns = time.time_ns()
            return
        end_ns = time.time_ns()
        dur_ns = end_ns - self._gc_start_ns
        if self.gc_threshold_ns is not None and dur_ns >= self.gc_threshold_ns:
            self.gc_pauses.append(
                {
                    "start_ns": self._gc_start_ns,
                    "dur_ns": dur_ns,
                    "generation": info.get("generation", -1),
                    "collected": info.get("collected", 0),
                    "uncollectable": info.get("uncollectable", 0),
                    "tid": threading.get_native_id(),
                }
            )

    # -- lifecycle -----------------------------------------------------------
    def attach(self) -> None:
        global _active
        if self.gc_threshold_ns is not None:
            gc.callbacks.append(self._on_gc)
        if self.record_markers:
            _active = self

    def detach(self) -> None:
        global _active
        if _active is self:
            _active = None
        if self._on_gc in gc.callbacks:
            gc.callbacks.remove(self._on_gc)
        self.end_step(time.time_ns())
        self.flush_open_ranges()
        if self._cpu_clock is not None:
            self._cpu_clock.close()

    def flush_open_ranges(self) -> None:
        """Write ranges still open at window end, with an unknown end."""
        for rng in _open_ranges.values():
            self.ranges.append(range_record(rng, None, None))
        _open_ranges.clear()

    def device_timer(self) -> Any:
        if self._device is None:
            from .device_markers import DeviceRangeTimer

            self._device = DeviceRangeTimer()
        return self._device

    def files(self) -> dict[str, Any]:
        """The window's files by kind (layout.WINDOW_JSON_FILES keys), as typed records."""
        # Imported here, at window end: `import mlprof` (mstx imports this module) stays free of msgspec.
        import msgspec

        from ..capture.records import GcRecord, MarkersFile, ModulesFile, PythonSamplesFile, StepRecord

        if self._device is not None:
            self._device.resolve(self.ranges)
        files: dict[str, Any] = {
            "steps": msgspec.convert(self.steps, list[StepRecord]),
            "markers": msgspec.convert({"marks": self.marks, "ranges": self.ranges}, MarkersFile),
            "gc": msgspec.convert(self.gc_pauses, list[GcRecord]),
        }
        for key, kind in (("python_samples", PythonSamplesFile), ("modules", ModulesFile)):
            value = self.attribution.get(key)
            if isinstance(value, dict):
                # Built without validating each element: the lists are the recorders' own, encoded as they are.
                value = kind(**value)
            if value is not None:
                files[key] = value
        return files


class StepCpuClock:
    """The process's CPU time and the stepping thread's wait for a CPU core, read at step boundaries.

    The wait is the kernel's run-queue delay of the thread that opened the clock
    (``/proc/thread-self/schedstat``, Linux): time it was ready to run while other
    processes held the cores. ``compare`` subtracts it from step time on CPU-only
    runs, which makes runs on a busy machine comparable with runs on a quiet one.
    Elsewhere, or read from another thread, the wait is None. About 2 us a read.
    """

    def __init__(self) -> None:
        self._tid = threading.get_ident()
        self._fd = open_schedstat()

    def read(self) -> tuple[int, int | None, int | None]:
        """The process's CPU ns, the stepping thread's wait ns and its own on-CPU ns (Nones: not measured)."""
        cpu_ns = time.process_time_ns()
        if threading.get_ident() != self._tid:
            return cpu_ns, None, None
        on_cpu, wait = on_cpu_and_delay_ns(self._fd)
        return cpu_ns, wait, on_cpu

    def close(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)


def range_record(rng: OpenRange, end_ns: int | None, end_tid: int | None) -> dict[str, Any]:
    return {
        "id": rng.range_id,
        "name": rng.name,
        "start_ns": rng.start_ns,
        "end_ns": end_ns,
        "tid": rng.tid,
        "end_tid": end_tid,
        "stream": None if rng.stream is None else str(rng.stream),
        "device_start_ns": None,
        "device_end_ns": None,
    }


# The recorder of the window being recorded, if any. mstx reads this one
# global so that an idle marker costs a single attribute check.
_active: HostRecorder | None = None
# mstx ranges started in the current window and not ended yet, by id.
_open_ranges: dict[int, OpenRange] = {}


def active_recorder() -> HostRecorder | None:
    return _active
