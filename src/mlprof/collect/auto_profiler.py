"""Profiling a script that was not written for it (MLPROF_PROFILING_OPTIONS).

Iterations are marked by the optimizer's step; a loop without an optimizer
(inference) is marked by each DataLoader batch instead, until an optimizer
steps. The profile follows the options' schedule and stops itself when its
windows are done; whatever is open at exit is saved.
"""

from __future__ import annotations

import atexit
import logging
import os
import signal
import sys
import threading
import time
from pathlib import Path

from ..capture.output_path import rank_output_dir
from ..settings.schedule import ProfilerAction
from .profile_builder import build_profile
from .environment import rank_info
from .failsafe import FailSafe
from .job_profilers import guard_job_profilers, on_job_profiler_start
from .run_options import TRAINER_STEPS_ENV, RunOptions
from .storage import age_out

__all__ = ["AutoProfiler", "on_dataloader_batch"]

logger = logging.getLogger("mlprof")


class AutoProfiler:
    def __init__(self, options: RunOptions) -> None:
        self.options = options
        self.prof = None
        self.done = False
        self.optimizer_seen = False
        self._windows_seen = 0
        self._sigterm_handled = False
        self._output_dir: Path | None = None
        # Trainer numbering (mlprof run --config): step N is the schedule's step N - 1.
        self._first_index = 0
        # Steps after the profiler stopped, and when the last ended: the job's memory over them is judged from
        # the host samples (analysis/growth.py). Counting costs an int and a clock read a step.
        self._steps_after_stop = 0
        self._last_boundary_ns = 0
        self._failsafe = FailSafe(self._switch_off, owner="automatic profiling")
        atexit.register(self._at_exit)
        # Before the job can import torch: a session the job prepares before the first
        # optimizer step must be seen too (mlprof then never starts one).
        on_job_profiler_start(self.yield_to_job_profiler)
        guard_job_profilers()

    def on_optimizer_step(self) -> None:
        self.optimizer_seen = True
        self.boundary()

    def on_batch(self) -> None:
        if not self.optimizer_seen:
            self.boundary()

    def boundary(self) -> None:
        prof = self.prof
        if prof is not None and not self.done and prof._monitor is not None and prof._monitor.fast_left:
            # Monitor mode's fast path (collect/monitor.py): a clock read, no torch call, no signal to defer.
            prof.step()
            return
        if self.done:
            self._steps_after_stop += 1
            self._last_boundary_ns = time.time_ns()
            return
        with _signals_deferred():
            self._failsafe.run("a step boundary", self._step)
        if not self._sigterm_handled:
            self._sigterm_handled = True
            _exit_cleanly_on_sigterm()

    def _step(self) -> None:
        if self.prof is None:
            self._start()
            return
        if self._job_profiler_running():
            return
        self.prof.step()
        self._after_step()

    def _switch_off(self) -> None:
        self.done = True

    def yield_to_job_profiler(self) -> None:
        """The job starts a torch profiler of its own: torch runs one session at a
        time, so automatic profiling stops for good, before the job's session
        starts (finished windows are kept; the capture says why it stopped)."""
        if self.done:
            return
        logger.warning("mlprof run: the job starts its own profiler; automatic profiling stops here "
                       "(its own traces are written as usual)")
        if self.prof is not None:
            self.prof._stopped_early(f"the job started its own torch profiler at step {self.prof.step_num}, "
                                     "and mlprof stood aside (torch runs one profiler session at a time)")
        with _signals_deferred():
            self.close()
        self.done = True

    def _job_profiler_running(self) -> bool:
        """A session of the job's that the start hooks did not announce (torch's C API): stand aside too."""
        from .torch_backend import job_profiler_running

        if not job_profiler_running(self.prof._backend):
            return False
        self.yield_to_job_profiler()
        return True

    def _start(self) -> None:
        import torch

        if torch.autograd._profiler_enabled():
            self.yield_to_job_profiler()
            return
        # {id}/{rank} in the output: this process's own directory (seed 003's rank_{id} layout).
        self._output_dir = rank_output_dir(self.options.output, rank_info()["rank"])
        # The first boundary ends the first optimizer step: the step starting now is a trainer's step 2.
        numbered_from = 2 if os.environ.get(TRAINER_STEPS_ENV) else None
        self._first_index = 1 if numbered_from else 0
        self.prof = build_profile(self.options, self._output_dir, numbered_from=numbered_from, analyse=False)
        # This profiler is the one others yield to; it does not yield to itself.
        self.prof._backend._automatic = True
        self.prof.start()

    def _after_step(self) -> None:
        prof, opts = self.prof, self.options
        windows = prof._window_index
        if windows != self._windows_seen:
            self._windows_seen = windows
            if opts.storage_limit_bytes and self._output_dir is not None:
                age_out(self._output_dir, opts.storage_limit_bytes)
        if not prof.enabled or self._windows_done(prof):
            self.close()

    def _windows_done(self, prof) -> bool:  # noqa: ANN001
        """Every window of ``--repeat`` recorded (never with --repeat 0)."""
        opts = self.options
        if not opts.repeat:
            return False
        finished = getattr(prof._schedule, "finished", None)
        if finished is not None:
            # A window sized by evidence ends when its schedule says so, once its last step is recorded: the
            # schedule is finished from the step it answers RECORD_AND_SAVE, and stopping at that step's start
            # cut every default capture's last step to a 0.1 ms piece.
            return bool(finished) and prof._schedule(prof.step_num) is ProfilerAction.NONE
        cycle = opts.wait + opts.warmup + opts.active
        index = prof.step_num - self._first_index  # the schedule's step
        return index >= opts.skip_first + opts.repeat * cycle

    def close(self) -> None:
        if self.prof is not None and not self.done:
            self.done = True
            self.prof.stop()

    def _at_exit(self) -> None:
        self.close()
        if self.prof is not None and self._steps_after_stop:
            try:
                self.prof.record_steps_after_stop(self._steps_after_stop, self._last_boundary_ns)
            except Exception as exc:  # noqa: BLE001 - the job is exiting: one line, never a traceback
                logger.warning("mlprof: steps after the profile not recorded: %s", exc)


class _signals_deferred:
    """Hold Ctrl-C and SIGTERM while torch's profiler changes state.

    An exception raised in the middle of Kineto's stop or trace export leaves
    torch's profiler half stopped, and stopping it again at exit can crash the
    interpreter; so the signal is delivered right after the profiler call.
    """

    def __enter__(self) -> None:
        self.pending: list[int] = []
        self.previous = {}
        if threading.current_thread() is not threading.main_thread():
            return
        for sig in (signal.SIGINT, signal.SIGTERM):
            self.previous[sig] = signal.signal(sig, lambda signum, frame: self.pending.append(signum))

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)
        for signum in self.pending:
            handler = self.previous.get(signum)
            if callable(handler):
                handler(signum, None)
            elif handler == signal.SIG_DFL:
                signal.raise_signal(signum)


def _exit_cleanly_on_sigterm() -> None:
    """SIGTERM (torchrun's stop) ends Python without atexit; turn it into an exit that saves the window."""
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))


def on_dataloader_batch(callback) -> None:
    """Call ``callback`` after each batch any DataLoader yields."""
    from .import_hooks import after_import

    def patch(module) -> None:  # noqa: ANN001
        base = module._BaseDataLoaderIter
        original = base.__next__

        def __next__(self):  # noqa: ANN001, N807
            batch = original(self)
            callback()
            return batch

        base.__next__ = __next__

    after_import("torch.utils.data.dataloader", patch)
