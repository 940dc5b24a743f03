"""Sampled Python stacks of the training thread, for one capture window.

Two ways to read the stack, the first wherever it can be used:

* **The thread reads its own stack** (``signal``): a POSIX timer sends a
  real-time signal to the training thread every ``interval_ns``
  (``signal_timer``), and the Python handler, which CPython runs on that
  thread between two bytecodes, walks the frames it is handed. Reading one's
  own frames is safe; no other thread takes the GIL to sample. A tick that
  comes while the thread is inside a torch op (or waits for the GIL) is
  handled when the op returns, on the line that called it: the handler counts
  the ticks due since the last one by the clock and writes one sample per
  tick, each at its own tick's time, so a 50 ms op still gets its five
  samples. Needs Linux, the main thread (only it runs signal handlers) and a
  real-time signal nobody else in the process handles.
* **Another thread reads it** (``thread``, everywhere else): a daemon thread
  reads the training thread's stack every ``interval_ns``
  (``thread_stacks.ThreadStacks``: in one C call holding the GIL, since
  walking another thread's frames from Python crashes CPython 3.11; the C
  call crashed too, in 1 run of 218, docs/collection.md).

Frames and whole stacks are interned, so a sample costs two ints once its
stack has been seen; the result is python_samples.json
(docs/capture_format.md). Nothing here imports torch.

A sample shows where the thread is, not what it spent the interval doing:
when other processes hold the cores, a preempted thread stays on the line it
was preempted at, and every sample repeats it (measured on a busy 2-core
machine: a 50 us ``randn`` got 3 of 18 forward samples). So where Linux
reports the thread's run-queue delay (``/proc/self/task/TID/schedstat``),
samples after an interval the thread spent mostly waiting for a core are
left out and counted (``waited``). Sleeps and I/O are not waits for a core:
their samples stay.

With a sampling thread, a sample needs the GIL, so it shows where the
training thread is when it lets the GIL go: at once inside a torch op, but in
plain Python only when the interpreter forces a switch, after the switch
interval (5 ms by default). So while it samples, that thread lowers the
switch interval to ``SWITCH_INTERVAL_S`` (0.5 ms; ``sys.getswitchinterval``
is restored at stop unless the job changed it meanwhile). The signal needs
no GIL and leaves the switch interval alone.

The sampler must never hurt the job: it only reads stacks, its buffer is
bounded, and any exception stops sampling for the window (logged at debug
level, never printed into the job's output).
"""

from __future__ import annotations

import atexit
import logging
import os
import sys
import threading
import time
from typing import Any

from mlprof.collect.dynamo_skip import hide_from_dynamo
from mlprof.collect.schedstat import open_schedstat, run_delay_ns
from mlprof.collect.signal_timer import SignalTimer, install_handler, usable_signal
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
# Distinct (code, instruction) stacks remembered by the timer signal's handler; past it a new stack's
# lines are read every time (still right, only slower).
_MAX_KEYS = 50_000


# The sampler whose timer ticks now (at most one: windows do not overlap), for the signal handler.
_ticking: "StackSampler | None" = None


def _on_tick(_signum: int, frame: Any) -> None:
    """The timer signal's handler, run by CPython on the training thread; installed once and left (a late
    tick must not meet the signal's default action, which ends the process)."""
    sampler = _ticking
    if sampler is not None:
        sampler._tick(frame)


@atexit.register
def _stop_ticking() -> None:
    # Before the interpreter's own shutdown puts the signal back to its default action.
    sampler = _ticking
    if sampler is not None:
        sampler._stop_timer()


class StackSampler:
    """Samples one thread's Python stack between start() and stop(): by a timer signal the thread handles
    itself where it can (``method`` "signal"), else from a daemon thread ("thread")."""

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
        # (code, last instruction) of each frame, innermost first -> stack index: a frame's line costs a
        # walk of its code's line table, so a stack seen before is known without reading its lines.
        self._by_code: dict[tuple, int] = {}
        self._reader: ThreadStacks | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._switch_interval_s: float | None = None  # the job's, while ours is set
        self.method = "thread"
        self._timer: SignalTimer | None = None
        self._sched: int | None = None
        self._t0_mono_ns = 0
        self._t0_wall_ns = 0
        self._ticks = 0  # ticks handled (sampled, waited or dropped) since the timer started
        self._last_wait: tuple[int, int] | None = None
        self._in_tick = False

    @classmethod
    def for_current_thread(cls, interval_ns: int) -> "StackSampler":
        return cls(threading.get_ident(), threading.get_native_id(), interval_ns)

    # -- lifecycle (called from the training thread) ---------------------------------
    def start(self) -> None:
        if self.target_ident == threading.get_ident() and self._start_timer():
            return
        if sys.getswitchinterval() > SWITCH_INTERVAL_S:
            self._switch_interval_s = sys.getswitchinterval()
            sys.setswitchinterval(SWITCH_INTERVAL_S)
        self._thread = threading.Thread(target=self._run, name=THREAD_NAME, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop sampling and wait for the thread (briefly: it only ever sleeps or walks a stack)."""
        self._stop_timer()
        self._stop.set()
        saved, self._switch_interval_s = self._switch_interval_s, None
        if saved is not None and sys.getswitchinterval() == SWITCH_INTERVAL_S:
            sys.setswitchinterval(saved)
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=1.0)

    # -- the timer signal ----------------------------------------------------------------
    def _start_timer(self) -> bool:
        """Start sampling by timer signal; False where it cannot be used here (the thread reads instead)."""
        global _ticking
        if _ticking is not None:
            return False
        try:
            signum = usable_signal(_on_tick)
            if signum is None:
                return False
            install_handler(signum, _on_tick)
            hide_from_dynamo(_on_tick)  # a tick inside a compiled region must not get the handler compiled
            timer = SignalTimer(signum, self.target_tid, self.interval_ns)
        except (OSError, ValueError, RuntimeError) as exc:
            logger.debug("mlprof: no timer signal for stack sampling (%s); a thread samples instead", exc)
            return False
        self._sched = open_schedstat(self.target_tid)
        self._last_wait = _read_wait(self._sched)
        self.method, self._timer = "signal", timer
        _ticking = self
        # The ticks fall at t0 + k * interval (the kernel re-arms from each due time, not from when it fired).
        self._t0_wall_ns = time.time_ns()
        self._t0_mono_ns = time.monotonic_ns()
        try:
            timer.start()
        except OSError as exc:
            self._stop_timer()
            logger.debug("mlprof: the stack sampler's timer did not start (%s); a thread samples instead", exc)
            self.method = "thread"
            return False
        return True

    def _stop_timer(self) -> None:
        global _ticking
        timer, self._timer = self._timer, None
        if timer is not None:
            timer.delete()
        if _ticking is self:
            _ticking = None
        sched, self._sched = self._sched, None
        if sched is not None:
            os.close(sched)

    def _tick(self, frame: Any) -> None:
        """On the training thread: one sample for each tick due since the last, all with the stack it is at."""
        if self._in_tick or self._timer is None:  # a tick inside this handler, or one after stop
            return
        self._in_tick = True
        try:
            due = (time.monotonic_ns() - self._t0_mono_ns) // self.interval_ns
            first = self._ticks + 1
            if due < first:
                return
            self._ticks = due
            count = due - first + 1
            wait = _read_wait(self._sched)
            waited, self._last_wait = mostly_waited(self._last_wait, wait), wait
            if waited:
                self.waited += count
                return
            room = self.max_samples - len(self._samples) // 2
            if room < count:
                self.dropped += count - max(room, 0)
                count = max(room, 0)
            if frame is None:  # no Python frame to read (the interpreter shutting down): nothing to write
                self.dropped += count
                return
            if not count:
                return
            key = _frame_key(frame)
            stack = self._by_code.get(key)
            if stack is None:
                frames = _own_frames(frame)
                stack = self._by_frames.get(frames)
                if stack is None:
                    stack = self._by_frames[frames] = self._intern_stack(frames)
                if len(self._by_code) < _MAX_KEYS:
                    self._by_code[key] = stack
            samples = self._samples
            for k in range(first, first + count):
                samples.append(self._t0_wall_ns + k * self.interval_ns)
                samples.append(stack)
        except Exception as exc:  # noqa: BLE001 - raised here, it would land in the job's own code
            self.error = f"{type(exc).__name__}: {exc}"
            self._stop_timer()
            logger.debug("mlprof: Python stack sampling stopped for this window: %s", self.error, exc_info=True)
        finally:
            self._in_tick = False

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
        return self._timer is not None or (self._thread is not None and self._thread.is_alive())

    # -- results -----------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        """python_samples.json; call after stop()."""
        flat = self._samples
        # Whole pairs only, should a sampler that did not stop in time still be appending.
        pairs = len(flat) // 2 * 2
        return {
            "interval_ns": self.interval_ns,
            "method": self.method,
            "tid": self.target_tid,
            "frames": [list(f) for f in self.frames],
            "stacks": [list(s) for s in self.stacks],
            "samples": [[flat[i], flat[i + 1]] for i in range(0, pairs, 2)],
            "dropped": self.dropped,
            "waited": self.waited,
        }


def _frame_key(frame: Any) -> tuple:
    """What tells the thread's stack from ``frame`` outwards apart, cheaply: each frame's code and its last
    instruction, for the innermost ``MAX_STACK_DEPTH`` frames (all a stored stack keeps)."""
    key: list = []
    append = key.append
    depth = 0
    while frame is not None and depth < MAX_STACK_DEPTH:
        append(frame.f_code)
        append(frame.f_lasti)
        frame = frame.f_back
        depth += 1
    return tuple(key)


def _own_frames(frame: Any) -> tuple[tuple[str, int, str], ...]:
    """The frames from ``frame`` outwards (innermost first, at most ``MAX_STACK_DEPTH``), as the thread that
    runs them reads them: safe, unlike reading another thread's."""
    frames = []
    while frame is not None and len(frames) < MAX_STACK_DEPTH:
        code = frame.f_code
        frames.append((code.co_filename, frame.f_lineno or 0, code.co_name))
        frame = frame.f_back
    return tuple(frames)


def _read_wait(fd: int | None) -> tuple[int, int] | None:
    """(monotonic ns, the thread's total run-queue delay ns), or None where not measured."""
    delay = run_delay_ns(fd)
    return None if delay is None else (time.monotonic_ns(), delay)


def mostly_waited(before: tuple[int, int] | None, after: tuple[int, int] | None) -> bool:
    """Whether the thread spent over half the time between two readings ready to run with no core free."""
    if before is None or after is None or after[0] <= before[0]:
        return False
    return 2 * (after[1] - before[1]) > after[0] - before[0]
