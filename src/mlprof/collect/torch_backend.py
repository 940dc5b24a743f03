"""torch.profiler underneath mlprof.profile: options per level and window hooks.

The subclass keeps torch's own schedule state machine (warmup, cycles,
DEVICE_STOPPED handling, ProfilerStep#N annotations) and only adds hooks at
the window edges, so mlprof's windows are exactly torch's.
"""

from __future__ import annotations

import logging
import os
import warnings
from typing import Any, Callable, Protocol

import torch
from torch._C._profiler import _ExperimentalConfig
from torch.profiler import ProfilerAction as TorchAction
from torch.profiler import ProfilerActivity as TorchActivity
from torch.profiler import profile as TorchProfile

from ..settings.profiler_config import CollectOptions, ProfilerActivity, ProfilerLevel
from ..settings.schedule import ProfilerAction
from .job_profilers import announce_job_profiler, own_session

__all__ = ["WindowHooks", "ScheduledBackend", "torch_profile_kwargs", "job_profiler_running"]

logger = logging.getLogger("mlprof")


def job_profiler_running(backend: "ScheduledBackend") -> bool:
    """A torch profiler session is on and it is not ``backend``'s: the job's own, started
    where the guard does not see it (torch's C API, the legacy profiler)."""
    return torch.autograd._profiler_enabled() and not backend.session_on


_TO_TORCH = {action: TorchAction[action.name] for action in ProfilerAction}
# torch's step() tells the Kineto daemon about each step when this is set: then every step goes through it.
_DAEMON_STEPS = bool(os.environ.get("KINETO_USE_DAEMON", ""))

_LEVEL_RANK = {
    ProfilerLevel.Level_none: 0,
    ProfilerLevel.Level0: 1,
    ProfilerLevel.Level1: 2,
    ProfilerLevel.Level2: 3,
}


def torch_profile_kwargs(options: CollectOptions, trace_only: bool) -> dict[str, Any]:
    """torch.profiler arguments for a level; the user's own switches only add to it."""
    rank = _LEVEL_RANK[options.profiler_level]
    activities = [TorchActivity.CPU if a is ProfilerActivity.CPU else TorchActivity.CUDA for a in options.activities
                  if a in (ProfilerActivity.CPU, ProfilerActivity.CUDA)]
    uses_cuda = ProfilerActivity.CUDA in options.activities
    with_stack = options.with_stack or rank >= 3
    return {
        "activities": activities,
        "record_shapes": options.record_shapes or rank >= 2,
        "profile_memory": options.profile_memory or rank >= 3,
        "with_stack": with_stack,
        "with_flops": options.with_flops or rank >= 3,
        "with_modules": options.with_modules,
        "experimental_config": _ExperimentalConfig(
            # torch refuses trace_only with stacks (they need its event post-processing).
            trace_only=trace_only and not with_stack,
            # Without verbose, torch 2.13 keeps no Python stacks on CPU ops.
            verbose=with_stack,
            enable_cuda_sync_events=uses_cuda and rank >= 3,
        ),
    }


class WindowHooks(Protocol):
    def window_started(self) -> None: ...
    def window_stopping(self) -> None: ...
    def window_ready(self) -> None: ...


class ScheduledBackend(TorchProfile):
    """torch.profiler.profile with mlprof's window hooks.

    With ``kineto=False`` (Level_none) the schedule still runs and the hooks
    still fire, but torch's profiler is never started.
    """

    def __init__(
        self,
        hooks: WindowHooks,
        schedule_fn: Callable[[int], ProfilerAction],
        kineto: bool,
        record_steps: bool,
        torch_kwargs: dict[str, Any],
        automatic: bool = False,
    ) -> None:
        self._hooks = hooks
        self._kineto = kineto
        # Whether this window runs Kineto: not when another session is already on.
        self._kineto_window = kineto
        self._automatic = automatic
        # Between this backend's session start (prepare_trace) and its stop.
        self.session_on = False
        super().__init__(
            schedule=lambda step: _TO_TORCH[schedule_fn(step)],
            on_trace_ready=lambda _prof: hooks.window_ready(),
            **torch_kwargs,
        )
        # ProfilerStep#N annotations only mean something when Kineto records.
        self.record_steps = record_steps and kineto

    def idle(self) -> bool:
        """Nothing records now and the next step changes no torch state unless the schedule says so: steps
        may then be counted without ``step()`` (:meth:`skip_idle_steps`)."""
        return self.current_action is TorchAction.NONE and self.step_rec_fn is None and not _DAEMON_STEPS

    def skip_idle_steps(self, count: int) -> None:
        """``count`` steps passed while :meth:`idle`, on a schedule that said NONE for each (monitor mode's
        fast path between windows: collect/monitor.py)."""
        self.step_num += count

    def step(self) -> None:
        """torch's step, without its per-step work where nothing records.

        From a step under NONE to another under NONE torch changes no state, yet still builds and enters a
        ``ProfilerStep#N`` record_function that nothing records and reads the environment: about half of a
        step boundary's cost between windows (monitor mode's every step). Anything else is torch's own step.
        """
        if not self.idle():
            super().step()
            if self.current_action is TorchAction.NONE and self.step_rec_fn is not None:
                # The window just closed: the annotation of a step nothing records is dropped at once.
                self.step_rec_fn.__exit__(None, None, None)
                self.step_rec_fn = None
            return
        self.step_num += 1
        action = self.schedule(self.step_num)
        if action is TorchAction.NONE:
            return
        prev, self.current_action = self.current_action, action
        self._transit_action(prev, action)
        if self.record_steps:
            self.step_rec_fn = torch.autograd.profiler.record_function("ProfilerStep#" + str(self.step_num))
            self.step_rec_fn.__enter__()

    def end_step_annotation(self) -> None:
        """Close the trace's ``ProfilerStep#N`` span now, where mlprof's own record of the step ends: what
        mlprof runs before the next ``step()`` (the host-speed probe) then lies between two steps' spans, not
        in the step before. torch's ``step()`` skips an annotation already closed."""
        if self.step_rec_fn is not None:
            try:
                self.step_rec_fn.__exit__(None, None, None)
            finally:
                self.step_rec_fn = None

    def prepare_trace(self) -> None:
        if not self._automatic:
            announce_job_profiler()
        self._kineto_window = self._kineto
        if self._kineto and torch.autograd._profiler_enabled():
            # Another profiler session is running (the job's own, or a second
            # mlprof.profile): record this window without Kineto instead of
            # crashing torch.
            self._kineto_window = False
            logger.warning("mlprof: another torch profiler session is running; this window records "
                           "steps, markers and GC only")
        if self._kineto_window:
            with warnings.catch_warnings():
                # torch warns that each cycle drops the previous one's events;
                # mlprof saves every cycle before that happens.
                warnings.filterwarnings("ignore", message=".*Profiler clears events.*")
                with own_session():
                    super().prepare_trace()
                self.session_on = True

    def start_trace(self) -> None:
        if self._kineto_window:
            with own_session():
                super().start_trace()
        self._hooks.window_started()

    def stop_trace(self) -> None:
        self._hooks.window_stopping()
        if self._kineto_window:
            self.session_on = False
            super().stop_trace()

    def set_first_step(self, step: int) -> None:
        """Number the first step ``step``: dynamic profiling starts in the middle of a run."""
        self.step_num = step
        action = self.schedule(step)
        self.current_action = action
        self._prev_schedule_action = action

    def has_trace(self) -> bool:
        return self._kineto_window and self.profiler is not None

    def abandon(self) -> None:
        """Stop torch's profiler without writing anything, after a failure."""
        if self.step_rec_fn is not None:
            try:
                self.step_rec_fn.__exit__(None, None, None)
            finally:
                self.step_rec_fn = None
        if self._kineto_window and self.session_on and torch.autograd._profiler_enabled():
            self.session_on = False
            if self.profiler is not None:
                self.profiler.__exit__(None, None, None)
