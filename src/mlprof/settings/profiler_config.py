"""Collection options: the enums, ExperimentalConfig and CollectOptions of mlprof.profile.

These are plain Python (no torch) so that configs can be built, validated and
serialised on any machine; ``mlprof.collect`` maps them onto torch.profiler.
Every field's type, default, help and check come from the option model
(:mod:`mlprof.settings.options`), shared with ``mlprof run``, ``MLPROF_PROFILING_OPTIONS``,
the dynamic config file and the training config's profile section.
"""

from __future__ import annotations

import enum
import logging
from dataclasses import InitVar, dataclass, field, fields
from typing import Any

from mlprof.errors import ConfigError
from mlprof.settings.options import (EXPERIMENTAL, PROFILE, ExportType, HostSystem, ProfilerActivity, ProfilerLevel,
                      check_activities, check_fields, option_field, options_for, reject_unknown)
from mlprof.settings.options import supported_activities

__all__ = [
    "ProfilerActivity",
    "ProfilerLevel",
    "ExportType",
    "HostSystem",
    "ExperimentalConfig",
    "supported_activities",
    "supported_profiler_level",
    "supported_export_type",
]

logger = logging.getLogger("mlprof")

# Accepted for torch_npu compatibility and ignored (logged): mlprof keeps its raw
# traces after parsing (they are the input of any re-parse), so there is nothing
# to simplify. See docs/collection.md.
IGNORED_EXPERIMENTAL_KEYS = ("data_simplification",)


def _ignored(name: str, value: Any) -> None:
    logger.info("mlprof: %s=%r is accepted for torch_npu compatibility and ignored "
                "(the raw capture is always kept)", name, value)


@dataclass(frozen=True)
class ExperimentalConfig:
    """Extended collection options (the Ascend PyTorch Profiler's ``_ExperimentalConfig``).

    Every field's default, help and check come from mlprof.settings.options.
    """

    profiler_level: ProfilerLevel = option_field(EXPERIMENTAL, "profiler_level")
    export_type: tuple[ExportType, ...] = option_field(EXPERIMENTAL, "export_type")
    mstx: bool = option_field(EXPERIMENTAL, "mstx")
    gc_detect_threshold: float | None = option_field(EXPERIMENTAL, "gc_detect_threshold")
    host_sys: tuple[HostSystem, ...] = option_field(EXPERIMENTAL, "host_sys")
    host_sys_freq: int = option_field(EXPERIMENTAL, "host_sys_freq")
    python_sampling: bool = option_field(EXPERIMENTAL, "python_sampling")
    python_sampling_interval_ms: float = option_field(EXPERIMENTAL, "python_sampling_interval_ms")
    record_modules: bool = option_field(EXPERIMENTAL, "record_modules")
    monitor: bool = option_field(EXPERIMENTAL, "monitor")
    monitor_max_windows: int = option_field(EXPERIMENTAL, "monitor_max_windows")
    # torch_npu's keyword, accepted and ignored (not stored, not in to_dict()).
    data_simplification: InitVar[Any] = None

    def __post_init__(self, data_simplification: Any) -> None:
        # Validated once here; everything downstream trusts the types.
        check_fields(self)
        if data_simplification is not None:
            _ignored("data_simplification", data_simplification)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form, as written to profiler_info.json and config files."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, enum.Enum):
                value = value.name
            elif isinstance(value, tuple):
                value = [v.name if isinstance(v, enum.Enum) else v for v in value]
            out[f.name] = value
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "ExperimentalConfig":
        reject_unknown(data, {o.name for o in options_for(EXPERIMENTAL)} | set(IGNORED_EXPERIMENTAL_KEYS),
                       "experimental_config: ")
        return cls(**data)


def supported_profiler_level() -> list[ProfilerLevel]:
    return list(ProfilerLevel)


def supported_export_type() -> list[ExportType]:
    return list(ExportType)


@dataclass(frozen=True)
class CollectOptions:
    """The options of one mlprof.profile session, validated once.

    This is what lands in profiler_info.json under ``config``.
    """

    activities: tuple[ProfilerActivity, ...] = (ProfilerActivity.CPU,)
    record_shapes: bool = option_field(PROFILE, "record_shapes")
    profile_memory: bool = option_field(PROFILE, "profile_memory")
    with_stack: bool = option_field(PROFILE, "with_stack")
    with_modules: bool = option_field(PROFILE, "with_modules")
    with_flops: bool = option_field(PROFILE, "with_flops")
    experimental_config: ExperimentalConfig = field(default_factory=ExperimentalConfig)

    def __post_init__(self) -> None:
        object.__setattr__(self, "activities", check_activities(self.activities))
        check_fields(self)
        if self.experimental_config is None:
            object.__setattr__(self, "experimental_config", ExperimentalConfig())
        elif not isinstance(self.experimental_config, ExperimentalConfig):
            raise ConfigError(
                "experimental_config: expected mlprof.ExperimentalConfig, "
                f"got {type(self.experimental_config).__name__}"
            )

    @property
    def profiler_level(self) -> ProfilerLevel:
        return self.experimental_config.profiler_level

    def profile_kwargs(self) -> dict[str, Any]:
        """The keyword arguments of ``mlprof.profile`` that build these options again."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def to_dict(self) -> dict[str, Any]:
        return {
            "activities": [a.name for a in self.activities],
            **{o.name: getattr(self, o.name) for o in options_for(PROFILE) if o.name != "activities"},
            "experimental_config": self.experimental_config.to_dict(),
        }
