"""Options of ``mlprof run`` and of ``MLPROF_PROFILING_OPTIONS``: the ``run`` surface of mlprof.settings.options.

The fields, their defaults and help, the CLI flags (``--kebab-case``) and the
JSON keys (``snake_case``) all come from the option model, validated once.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict, dataclass, fields
from typing import Any

from ..settings.profiler_config import CollectOptions, ExperimentalConfig
from ..errors import ConfigError
from ..settings.options import (EXPERIMENTAL, PROFILE, RUN, add_arguments, check_fields, storage_limit_bytes,
                       option_field, options_for, reject_unknown)

__all__ = ["RunOptions", "OPTIONS_ENV", "RUN_SAMPLES_ENV", "TRAINER_STEPS_ENV"]

OPTIONS_ENV = "MLPROF_PROFILING_OPTIONS"
# Set by `mlprof run`, whose one sampler covers the whole job: its processes must not sample again.
RUN_SAMPLES_ENV = "MLPROF_RUN_SAMPLES"
# Set by `mlprof run --config`: number the steps like a trainer (the first optimizer step is step 1), as the
# config's profile_start_step/profile_stop_step count them.
TRAINER_STEPS_ENV = "MLPROF_TRAINER_STEPS"

def _field(key: str) -> Any:
    return option_field(RUN, key)


@dataclass(frozen=True)
class RunOptions:
    """``mlprof run``'s options; every field's default, help and check come from mlprof.settings.options."""

    activities: tuple[str, ...] | None = _field("activities")
    record_shapes: bool = _field("record_shapes")
    profile_memory: bool = _field("profile_memory")
    with_stack: bool = _field("with_stack")
    with_modules: bool = _field("with_modules")
    with_flops: bool = _field("with_flops")
    level: str = _field("level")
    export_type: tuple[str, ...] = _field("export_type")
    mstx: bool = _field("mstx")
    gc_detect_threshold: float | None = _field("gc_detect_threshold")
    host_sys: tuple[str, ...] = _field("host_sys")
    host_sys_freq: int = _field("host_sys_freq")
    python_sampling: bool = _field("python_sampling")
    python_sampling_interval_ms: float = _field("python_sampling_interval_ms")
    record_modules: bool = _field("record_modules")
    monitor: bool = _field("monitor")
    monitor_max_windows: int = _field("monitor_max_windows")
    output: str = _field("output")
    skip_first: int = _field("skip_first")
    wait: int = _field("wait")
    warmup: int = _field("warmup")
    active: int | str = _field("active")  # or "auto" (AUTO_ACTIVE): a window sized by evidence
    repeat: int = _field("repeat")
    storage_limit: str | None = _field("storage_limit")

    def __post_init__(self) -> None:
        check_fields(self)
        # Kept in their JSON spelling (MLPROF_PROFILING_OPTIONS is JSON): Level0, text, cpu.
        set_ = object.__setattr__
        set_(self, "level", self.level.name)
        set_(self, "export_type", tuple(e.value for e in self.export_type))
        set_(self, "host_sys", tuple(h.value for h in self.host_sys))

    def experimental_config(self, host_sys: tuple[str, ...] = ()) -> ExperimentalConfig:
        """The ExperimentalConfig of a profiled process (host_sys: what it samples itself)."""
        shared = {o.name: getattr(self, o.key(RUN)) for o in options_for(RUN) if EXPERIMENTAL in o.surfaces}
        return ExperimentalConfig(**{**shared, "host_sys": host_sys})

    def collect_options(self, host_sys: tuple[str, ...] = ()) -> CollectOptions:
        """What ``mlprof.profile`` is given in each profiled process (activities None: what the machine has)."""
        return CollectOptions(experimental_config=self.experimental_config(host_sys),
                              **{o.name: getattr(self, o.name) for o in options_for(RUN) if PROFILE in o.surfaces})

    @property
    def storage_limit_bytes(self) -> int | None:
        return None if self.storage_limit is None else storage_limit_bytes(self.storage_limit)

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> "RunOptions":
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise ConfigError(f"{OPTIONS_ENV} is not valid JSON: {exc}") from None
        if not isinstance(data, dict):
            raise ConfigError(f"{OPTIONS_ENV} must be a JSON object")
        reject_unknown(data, {f.name for f in fields(cls)}, f"{OPTIONS_ENV}: ")
        return cls(**data)

    # -- the CLI, generated from the fields -------------------------------------------
    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        add_arguments(parser, RUN)

    @classmethod
    def from_namespace(cls, args: argparse.Namespace) -> "RunOptions":
        return cls(**{f.name: getattr(args, f.name) for f in fields(cls)})
