"""Sampled Python stacks of the training thread, for one capture window.

A daemon thread reads the training thread's stack every ``interval_ns``
(``thread_stacks.ThreadStacks``: in one C call holding the GIL, since walking
another thread's frames from Python crashes CPython 3.11). Frames and whole
stacks are interned, so a sample costs two ints once its stack has been seen;
the result is python_samples.json (docs/capture_format.md). Nothing here
imports torch.

A sample shows where the thread is, not what it spent the interval doing:
when other processes hold the cores, a preempted thread stays on the line it
was preempted at, and every sample repeats it (measured on a busy 2-core
machine: a 50 us ``randn`` got 3 of 18 forward samples). So where Linux
reports the thread's run-queue delay (``/proc/self/task/TID/schedstat``), a
sample after an interval the thread spent mostly waiting for a core is left
out and counted (``waited``). Sleeps and I/O are not waits for a core: their
samples stay.

A sample needs the GIL, so it shows where the thread is when it lets the GIL
go: at once inside a torch op (ops run with the GIL released), but in plain
Python only when the interpreter forces a switch, after the switch interval
(5 ms by default). A Python stretch that ends sooner hands its samples to the
op after it: with 3 ms of Python between 3 ms ops, Python got 0 of 400 samples.
So while it samples, the sampler lowers the switch interval to
``SWITCH_INTERVAL_S`` (0.5 ms: Python got 40% of them, and a 20 ms stretch
49% instead of 35%; ``sys.getswitchinterval`` is restored at stop unless the
job changed it meanwhile). Two Python threads spinning side by side ran as many
iterations at 0.5 ms as at 5 ms.

The sampler must never hurt the job: it only reads stacks, its buffer is
bounded, and any exception stops sampling for the window (logged at debug
level, never printed into the job's output).
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from typing import Any

from mlprof.collect.schedstat import open_schedstat, run_delay_ns
from mlprof.collect.thread_stacks import ThreadStacks

__all__ = ["StackSampler", "MAX_STACK_DEPTH", "MAX_SAMPLES", "THREAD_NAME", "SWITCH_INTERVAL_S", "mostly_waited"]

logger = logging.getLogger("mlprof")

# Deeper stacks keep their innermost frames: that is where the time goes.
MAX_STACK_DEPTH = 64
# 200k samples is 1000 s at 5 ms; a window is a few steps, so this only bounds runaway windows.
MAX_SAMPLES = 200_000
THREAD_NAME = "mlprof-stack-sampler"
# The interpreter's switch interval while sampling (seconds): how late a sample in plain Python may be.
SWITCH_INTERVAL_S = 0.0005


class StackSampler:
    """Samples one thread's Python stack from a daemon thread between start() and stop()."""

    def __init__(self, target_ident: int, target_tid: int, interval_ns: int, max_samples: int = MAX_SAMPLES) -> None:
        self.target_ident = target_ident  # threading.get_ident() of the sampled thread
        self.target_tid = target_tid  # its native id, Kineto's tid
        self.interval_ns = interval_ns
        self.max_samples = max_samples
        self.frames: list[tuple[str, int, str]] = []
        self.stacks: list[tuple[int, ...]] = []
        # Flat [ts_ns, stack_index, ts_ns, stack_index, ...]: one list append per value, no pair objects.
        self._samples: list[int] = []
        self.dropped = 0
        self.waited = 0  # samples left out: the thread waited for a core most of the interval before them
        self.error: str | None = None
        self._line_index: dict[tuple[str, int, str], int] = {}  # (file, line, function) -> frame index
        self._stack_index: dict[tuple[int, ...], int] = {}
        self._by_frames: dict[tuple, int] = {}  # the reader's frames (innermost first) -> stack index
        self._reader: ThreadStacks | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._switch_interval_s: float | None = None  # the job's, while ours is set

    @classmethod
    def for_current_thread(cls, interval_ns: int) -> "StackSampler":
        return cls(threading.get_ident(), threading.get_native_id(), interval_ns)

    # -- lifecycle (called from the training thread) ---------------------------------
    def start(self) -> None:
        if sys.getswitchinterval() > SWITCH_INTERVAL_S:
            self._switch_interval_s = sys.getswitchinterval()
            sys.setswitchinterval(SWITCH_INTERVAL_S)
        self._thread = threading.Thread(target=self._run, name=THREAD_NAME, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop sampling and wait for the thread (briefly: it only ever sleeps or walks a stack)."""
        self._stop.set()
        saved, self._switch_interval_s = self._switch_interval_s, None
        if saved is not None and sys.getswitchinterval() == SWITCH_INTERVAL_S:
            sys.setswitchinterval(saved)
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=1.0)

    # -- the sampling thread -------------------------------------------------------------
    def _run(self) -> None:
        # Deadlines, not fixed sleeps: a sample that waited for the GIL (up to the
        # interpreter's switch interval, 5 ms, while the job runs Python) makes the
        # next wait shorter, so the rate stays near 1/interval.
        next_ns = time.monotonic_ns() + self.interval_ns
        sched = open_schedstat(self.target_tid)
        last = _read_wait(sched)
        try:
            while not self._stop.wait(max(0, next_ns - time.monotonic_ns()) / 1e9):
                now = _read_wait(sched)
                if mostly_waited(last, now):
                    self.waited += 1
                else:
                    self._sample_once()
                last = now
                next_ns = max(next_ns + self.interval_ns, time.monotonic_ns())
        except Exception as exc:  # noqa: BLE001 - a sampler bug must not reach the job
            self.error = f"{type(exc).__name__}: {exc}"
            logger.debug("mlprof: Python stack sampling stopped for this window: %s", self.error, exc_info=True)
        finally:
            if sched is not None:
                os.close(sched)
            reader, self._reader = self._reader, None
            if reader is not None:
                reader.close()

    def _sample_once(self) -> None:
        """Take one sample; once the buffer is full, only count what is missed."""
        if len(self._samples) >= 2 * self.max_samples:
            self.dropped += 1
            return
        if self._reader is None:
            self._reader = ThreadStacks(self.target_ident)
        frames = self._reader.read()
        # The dump's moment, taken right after it: the stack it shows.
        ts_ns = self._reader.read_ns
        if not frames:  # the thread is gone or has no Python frame: nothing to write
            return
        stack = self._by_frames.get(frames)
        if stack is None:
            stack = self._by_frames[frames] = self._intern_stack(frames)
        self._samples.append(ts_ns)
        self._samples.append(stack)

    def _intern_stack(self, frames: tuple) -> int:
        """The index of the stack of ``frames`` (innermost first), its innermost ``MAX_STACK_DEPTH`` kept."""
        indices = []
        for frame in reversed(frames[:MAX_STACK_DEPTH]):  # outermost first
            index = self._line_index.get(frame)
            if index is None:
                index = self._line_index[frame] = len(self.frames)
                self.frames.append(frame)
            indices.append(index)
        key = tuple(indices)
        stack = self._stack_index.get(key)
        if stack is None:
            stack = self._stack_index[key] = len(self.stacks)
            self.stacks.append(key)
        return stack

    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    # -- results -----------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        """python_samples.json; call after stop()."""
        flat = self._samples
        # Whole pairs only, should a sampler that did not stop in time still be appending.
        pairs = len(flat) // 2 * 2
        return {
            "interval_ns": self.interval_ns,
            "tid": self.target_tid,
            "frames": [list(f) for f in self.frames],
            "stacks": [list(s) for s in self.stacks],
            "samples": [[flat[i], flat[i + 1]] for i in range(0, pairs, 2)],
            "dropped": self.dropped,
            "waited": self.waited,
        }


def _read_wait(fd: int | None) -> tuple[int, int] | None:
    """(monotonic ns, the thread's total run-queue delay ns), or None where not measured."""
    delay = run_delay_ns(fd)
    return None if delay is None else (time.monotonic_ns(), delay)


def mostly_waited(before: tuple[int, int] | None, after: tuple[int, int] | None) -> bool:
    """Whether the thread spent over half the time between two readings ready to run with no core free."""
    if before is None or after is None or after[0] <= before[0]:
        return False
    return 2 * (after[1] - before[1]) > after[0] - before[0]
