"""A scheduled ``mlprof.profile`` built from RunOptions: for ``mlprof run``, the config file and the trainers.

``numbered_from`` numbers the profiler's steps like a trainer's (the first
step is 1, or the step a resumed run starts at) while ``skip_first`` keeps
counting from the first step, so ``start_step=5`` records step 5 whatever
step the session starts at.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mlprof.capture.output_path import rank_output_dir
from mlprof.settings.profiler_config import CollectOptions
from mlprof.settings.options import AUTO_ACTIVE
from mlprof.settings.schedule import ProfilerAction, evidence_schedule, schedule
from mlprof.collect.environment import rank_info
from mlprof.collect.run_options import RUN_SAMPLES_ENV, RunOptions

__all__ = ["make_profile", "build_profile", "profile_from_config", "DisabledProfile", "run_schedule"]

logger = logging.getLogger("mlprof")


def run_schedule(options: RunOptions) -> schedule | evidence_schedule:
    if options.active == AUTO_ACTIVE:
        return evidence_schedule(wait=options.wait, warmup=options.warmup, repeat=options.repeat,
                                 skip_first=options.skip_first)
    return schedule(wait=options.wait, warmup=options.warmup, active=options.active, repeat=options.repeat,
                    skip_first=options.skip_first)


class _CountedFromOne:
    """A schedule for steps numbered from 1 (a trainer's): step N is the schedule's step N - 1."""

    def __init__(self, base: schedule | evidence_schedule) -> None:
        self.base = base

    @property
    def finished(self) -> bool | None:
        """The base schedule's ``finished``; None for a fixed schedule, which has none (the caller counts its
        cycles instead: a False here kept a trainer's fixed-schedule profiler open to the job's end)."""
        finished = getattr(self.base, "finished", None)
        return None if finished is None else bool(finished)

    def __call__(self, step: int) -> ProfilerAction:
        return self.base(step - 1) if step >= 1 else ProfilerAction.NONE


def make_profile(options: CollectOptions, *, schedule: Any, on_trace_ready: Any,
                 first_step: int | None = None) -> Any:
    """The one place options become an ``mlprof.profile`` (not started): for ``mlprof run``,
    MLPROF_PROFILING_OPTIONS, the training config's profile section and dynamic profiling."""
    from mlprof.collect.profiler import profile

    prof = profile(schedule=schedule, on_trace_ready=on_trace_ready, **options.profile_kwargs())
    if first_step is not None:
        prof._set_first_step(first_step)
    return prof


def build_profile(options: RunOptions, output_dir: Path, *, numbered_from: int | None = None, analyse: bool = True,
                  worker_name: str | None = None) -> Any:
    """An ``mlprof.profile`` (not started) following ``options``' schedule, writing under ``output_dir``."""
    from mlprof.collect.handler import tensorboard_trace_handler

    # Monitor mode's windows are its own (collect/monitor.py): no schedule.
    sched = None if options.monitor else run_schedule(options)
    # Under `mlprof run` one sampler covers the whole job; otherwise each process samples itself.
    collect = options.collect_options(host_sys=() if os.environ.get(RUN_SAMPLES_ENV) else options.host_sys)
    return make_profile(
        collect,
        schedule=sched if numbered_from is None or sched is None else _CountedFromOne(sched),
        on_trace_ready=tensorboard_trace_handler(output_dir, worker_name=worker_name, analyse_flag=analyse),
        first_step=numbered_from,
    )


class DisabledProfile:
    """What ``profile_from_config`` returns when the config says ``profile: false``: same methods, no work."""

    enabled = False
    capture_dir = None
    step_num = 0

    def __init__(self, reason: str) -> None:
        self.reason = reason

    def start(self) -> None:
        pass

    def stop(self) -> None:
        pass

    def step(self) -> None:
        pass

    def add_metadata(self, key: str, value: str) -> None:
        pass

    def add_metadata_json(self, key: str, value: str) -> None:
        pass

    def __enter__(self) -> "DisabledProfile":
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def __repr__(self) -> str:
        return f"DisabledProfile({self.reason!r})"


def profile_from_config(config: str | os.PathLike | Mapping) -> Any:
    """An ``mlprof.profile`` set up from a training config's profile section (docs/integrations.md).

    Steps are numbered from 1, as ``profile_start_step``/``profile_stop_step``
    count them: call ``prof.step()`` after each training step. Captures go to
    ``profile_output_path`` with ``{id}`` replaced by this process's rank. With
    ``profile: false`` the object returned does nothing. A bad key or value
    raises ``mlprof.MlprofError`` (a ConfigError) naming it.
    """
    from mlprof.collect.training_config import load_profile_config

    cfg = load_profile_config(config)
    if not cfg.enabled:
        logger.info("mlprof: profiling is off (profile: false in %s)", cfg.source)
        return DisabledProfile(f"profile: false in {cfg.source}")
    rank = rank_info()["rank"]
    prof = build_profile(cfg.options, rank_output_dir(cfg.options.output, rank), numbered_from=1)
    prof.add_metadata_json("profile_config", json.dumps({
        "source": cfg.source, "profile_start_step": cfg.start_step, "profile_stop_step": cfg.stop_step,
        "init_start_profile": cfg.init_start}))
    return prof
