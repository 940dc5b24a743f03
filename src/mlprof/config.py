"""Collection options: the enums and ExperimentalConfig of mlprof.profile.

These are plain Python (no torch) so that configs can be built, validated and
serialised on any machine; ``mlprof.collect`` maps them onto torch.profiler.
Each option is defined once here and shared by the Python API, the capture
manifest and (later) the config file and the CLI.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field, fields
from typing import Any

from .errors import ConfigError, TorchUnavailableError

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


class ProfilerActivity(enum.Enum):
    """Which side of the job to record."""

    CPU = "CPU"
    CUDA = "CUDA"
    # Ascend NPUs, through torch_npu; refused with a clear message without it.
    NPU = "NPU"


class ProfilerLevel(enum.Enum):
    """How much to collect; each level includes everything of the one before.

    See docs/collection.md for exactly what each level records on CPU and CUDA.
    """

    Level_none = "Level_none"  # steps, markers, GC pauses: no torch.profiler at all
    Level0 = "Level0"  # + framework ops (CPU) and device kernels/memcpy/memset
    Level1 = "Level1"  # + op input shapes, runtime API calls, communication details
    Level2 = "Level2"  # + memory events, CUDA sync events, stacks, FLOPs


class ExportType(enum.Enum):
    """Result formats written by parsing."""

    Text = "text"  # trace_view.json and CSV/JSON summaries
    Db = "db"  # mlprof_{rank}.db (SQLite)


class HostSystem(enum.Enum):
    """Host resources that can be sampled while collecting (``host_sys``)."""

    CPU = "cpu"
    MEM = "mem"
    DISK = "disk"
    NETWORK = "network"


def _coerce_enum(enum_cls: type[enum.Enum], value: Any, option: str) -> enum.Enum:
    if isinstance(value, enum_cls):
        return value
    if isinstance(value, str):
        for member in enum_cls:
            if value.lower() in (member.name.lower(), str(member.value).lower()):
                return member
    names = ", ".join(m.name for m in enum_cls)
    raise ConfigError(f"{option}: {value!r} is not one of {names}")


# Below 0.5 ms the sampler thread would compete with the job for the GIL; above
# a second it would miss most steps.
MIN_SAMPLING_INTERVAL_MS = 0.5
MAX_SAMPLING_INTERVAL_MS = 1000.0


@dataclass(frozen=True)
class ExperimentalConfig:
    """Extended collection options (SPEC §1.1, seed 001 ``_ExperimentalConfig``)."""

    # How much to collect; Level0 is the useful default for finding slow ops.
    profiler_level: ProfilerLevel = ProfilerLevel.Level0
    # Result formats of parsing; several may be chosen.
    export_type: tuple[ExportType, ...] = (ExportType.Text,)
    # Record mlprof.mstx marks and ranges. On by default (unlike torch_npu's
    # msprof_tx) because an idle marker costs one attribute check.
    mstx: bool = True
    # After parsing, keep the results and drop the raw Kineto traces.
    data_simplification: bool = True
    # Python GC pauses at or above this many milliseconds become events;
    # None disables GC detection, 0 keeps every pause.
    gc_detect_threshold: float | None = None
    # Host resources to sample while collecting: any of cpu, mem, disk, network.
    host_sys: tuple[HostSystem, ...] = ()
    # Sample the training thread's Python stack every python_sampling_interval_ms
    # during each window (python_samples.json): where host time goes outside ops.
    python_sampling: bool = False
    # Sampling period; each sample walks the stack while holding the GIL.
    python_sampling_interval_ms: float = 10.0
    # Record every nn.Module forward call with its path (modules.json), through
    # global forward hooks; costs about a microsecond per module call.
    record_modules: bool = False

    def __post_init__(self) -> None:
        # Validated once here; everything downstream trusts the types.
        set_ = object.__setattr__
        set_(self, "profiler_level", _coerce_enum(ProfilerLevel, self.profiler_level, "profiler_level"))
        export = self.export_type
        if isinstance(export, (ExportType, str)):
            export = (export,)
        export = tuple(dict.fromkeys(_coerce_enum(ExportType, e, "export_type") for e in export))
        if not export:
            raise ConfigError("export_type: choose at least one of Text, Db")
        set_(self, "export_type", export)
        for name in ("mstx", "data_simplification", "python_sampling", "record_modules"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"{name}: expected True or False, got {getattr(self, name)!r}")
        threshold = self.gc_detect_threshold
        if threshold is not None:
            if isinstance(threshold, bool) or not isinstance(threshold, (int, float)):
                raise ConfigError(f"gc_detect_threshold: expected milliseconds >= 0 or None, got {threshold!r}")
            if not math.isfinite(threshold) or threshold < 0:
                raise ConfigError(f"gc_detect_threshold: expected milliseconds >= 0 or None, got {threshold!r}")
            set_(self, "gc_detect_threshold", float(threshold))
        interval = self.python_sampling_interval_ms
        if (isinstance(interval, bool) or not isinstance(interval, (int, float)) or not math.isfinite(interval)
                or not MIN_SAMPLING_INTERVAL_MS <= interval <= MAX_SAMPLING_INTERVAL_MS):
            raise ConfigError(f"python_sampling_interval_ms: expected milliseconds between {MIN_SAMPLING_INTERVAL_MS} "
                              f"and {MAX_SAMPLING_INTERVAL_MS}, got {interval!r}")
        set_(self, "python_sampling_interval_ms", float(interval))
        host = self.host_sys
        if isinstance(host, (HostSystem, str)):
            host = (host,)
        set_(self, "host_sys", tuple(dict.fromkeys(_coerce_enum(HostSystem, h, "host_sys") for h in host)))

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
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(f"experimental_config: unknown key(s) {', '.join(unknown)}")
        return cls(**data)


def _torch_npu_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("torch_npu") is not None


def check_activities(activities: Any) -> tuple[ProfilerActivity, ...]:
    """Validate a user's ``activities`` list; None means CPU plus CUDA when present."""
    if activities is None:
        return tuple(supported_activities())
    result = []
    for activity in activities:
        activity = _coerce_enum(ProfilerActivity, getattr(activity, "name", activity), "activities")
        if activity is ProfilerActivity.NPU and not _torch_npu_available():
            raise TorchUnavailableError(
                "ProfilerActivity.NPU needs torch_npu (Ascend), which is not installed; "
                "use ProfilerActivity.CPU and ProfilerActivity.CUDA"
            )
        result.append(activity)
    if not result:
        raise ConfigError("activities: choose at least one of CPU, CUDA")
    return tuple(dict.fromkeys(result))


def supported_activities() -> list[ProfilerActivity]:
    """Activities this machine can record: CPU always, CUDA with a CUDA build and device."""
    found = [ProfilerActivity.CPU]
    try:
        import torch
    except ImportError:
        return found
    if torch.cuda.is_available():
        found.append(ProfilerActivity.CUDA)
    if _torch_npu_available():
        found.append(ProfilerActivity.NPU)
    return found


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
    record_shapes: bool = False
    profile_memory: bool = False
    with_stack: bool = False
    with_modules: bool = False
    with_flops: bool = False
    experimental_config: ExperimentalConfig = field(default_factory=ExperimentalConfig)

    def __post_init__(self) -> None:
        for name in ("record_shapes", "profile_memory", "with_stack", "with_modules", "with_flops"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"{name}: expected True or False, got {getattr(self, name)!r}")
        if self.experimental_config is None:
            object.__setattr__(self, "experimental_config", ExperimentalConfig())
        elif not isinstance(self.experimental_config, ExperimentalConfig):
            raise ConfigError(
                "experimental_config: expected mlprof.ExperimentalConfig, "
                f"got {type(self.experimental_config).__name__}"
            )

    @property
    def level(self) -> ProfilerLevel:
        return self.experimental_config.profiler_level

    def to_dict(self) -> dict[str, Any]:
        return {
            "activities": [a.name for a in self.activities],
            "record_shapes": self.record_shapes,
            "profile_memory": self.profile_memory,
            "with_stack": self.with_stack,
            "with_modules": self.with_modules,
            "with_flops": self.with_flops,
            "experimental_config": self.experimental_config.to_dict(),
        }
