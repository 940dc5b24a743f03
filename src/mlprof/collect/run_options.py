"""Options of ``mlprof run`` and of ``MLPROF_PROFILING_OPTIONS``: one definition for both.

Each field carries its help text; the CLI flags (``--kebab-case``) and the
JSON keys (``snake_case``) are generated from the same list, validated once.
"""

from __future__ import annotations

import argparse
import json
import re
from dataclasses import MISSING, asdict, dataclass, field, fields
from typing import Any

from .._argparse import ListOption
from ..capture.output_path import check_output_template
from ..config import ExperimentalConfig, HostSystem, ProfilerLevel
from ..errors import ConfigError

__all__ = ["RunOptions", "parse_size", "OPTIONS_ENV", "RUN_SAMPLES_ENV", "TRAINER_STEPS_ENV"]

OPTIONS_ENV = "MLPROF_PROFILING_OPTIONS"
# Set by `mlprof run`, whose one sampler covers the whole job: its processes must not sample again.
RUN_SAMPLES_ENV = "MLPROF_RUN_SAMPLES"
# Set by `mlprof run --config`: number the steps like a trainer (the first optimizer step is step 1), as the
# config's profile_start_step/profile_stop_step count them.
TRAINER_STEPS_ENV = "MLPROF_TRAINER_STEPS"
MIN_STORAGE_LIMIT_BYTES = 200 * 1024 * 1024
_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt])?(i?b)?\s*$", re.IGNORECASE)
_UNITS = {"k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}
_LIST_CHOICES = {"host_sys": ("cpu", "mem", "disk", "network"), "export_type": ("text", "db")}


def parse_size(text: str | int) -> int:
    """'200MB', '1.5G', '500B', or a bare number of megabytes (as msprof's --storage-limit) -> bytes."""
    if isinstance(text, int) and not isinstance(text, bool):
        return text * _UNITS["m"]
    match = _SIZE_RE.match(str(text))
    if not match:
        raise ConfigError(f"storage_limit: {text!r} is not a size like 200MB or 2GB")
    number, unit, byte_suffix = float(match.group(1)), match.group(2), match.group(3)
    if unit is None:
        return int(number) if byte_suffix else int(number * _UNITS["m"])
    return int(number * _UNITS[unit.lower()])


def _float_or_none(text: str) -> float | None:
    """A CLI number that can be switched off: 'none' or 'off' -> None."""
    if text.strip().lower() in ("none", "off"):
        return None
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of ms or 'none', got {text!r}") from None


def _opt(default: Any, help_text: str, **meta: Any) -> Any:
    kwargs = {"default_factory": default} if callable(default) else {"default": default}
    return field(metadata={"help": help_text, **meta}, **kwargs)


@dataclass(frozen=True)
class RunOptions:
    output: str = _opt("./mlprof_result", "directory for the captures (one per process/rank); {id} or {rank} "
                                          "in it: each rank's own directory")
    level: str = _opt("Level0", "profiler level: Level_none, Level0, Level1, Level2")
    skip_first: int = _opt(5, "steps to skip before the first cycle (let the job reach steady state)")
    wait: int = _opt(0, "idle steps at the start of each cycle")
    warmup: int = _opt(1, "profiled but unrecorded steps before each recorded window")
    active: int = _opt(3, "steps recorded per window")
    repeat: int = _opt(1, "number of windows (0: until the job ends)")
    record_shapes: bool = _opt(False, "record op input shapes")
    profile_memory: bool = _opt(False, "record memory allocations")
    with_stack: bool = _opt(False, "record Python call stacks of ops")
    with_modules: bool = _opt(False, "record the module hierarchy of ops")
    with_flops: bool = _opt(False, "estimate FLOPs of matmul/conv ops")
    gc_detect_threshold: float | None = _opt(1.0, "record Python GC pauses of at least this many ms ('none': off)")
    python_sampling: bool = _opt(True, "sample the training thread's Python stack (python_samples.json)")
    python_sampling_interval_ms: float = _opt(10.0, "Python stack sampling period in ms (0.5-1000)")
    record_modules: bool = _opt(True, "record nn.Module forward calls with their paths (modules.json)")
    host_sys: tuple[str, ...] = _opt(lambda: ("cpu", "mem"), "host resources to sample: cpu,mem,disk,network")
    host_sys_freq: int = _opt(10, "host sampling frequency in Hz (1-50)")
    storage_limit: str | None = _opt(None, "age out the oldest capture data past this size (>= 200MB), e.g. 2GB")
    export_type: tuple[str, ...] = _opt(lambda: ("text",), "result formats after parsing: text, db")

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        check_output_template(self.output)
        for name in ("skip_first", "wait", "warmup", "active", "repeat", "host_sys_freq"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < (1 if name == "active" else 0):
                raise ConfigError(f"{name}: expected an integer >= {1 if name == 'active' else 0}, got {value!r}")
        if not 1 <= self.host_sys_freq <= 50:
            raise ConfigError(f"host_sys_freq: expected 1-50 Hz, got {self.host_sys_freq}")
        try:
            ProfilerLevel[self.level]
        except KeyError:
            raise ConfigError(f"level: {self.level!r} is not one of {', '.join(ProfilerLevel.__members__)}") from None
        for name in ("record_shapes", "profile_memory", "with_stack", "with_modules", "with_flops"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"{name}: expected true or false, got {getattr(self, name)!r}")
        host = self.host_sys
        if isinstance(host, str):
            host = tuple(h for h in host.split(",") if h)
        for item in host:
            if item not in {h.value for h in HostSystem}:
                raise ConfigError(f"host_sys: {item!r} is not one of cpu, mem, disk, network")
        set_(self, "host_sys", tuple(host))
        export = self.export_type
        if isinstance(export, str):
            export = tuple(e for e in export.split(",") if e)
        if not export or any(e not in ("text", "db") for e in export):
            raise ConfigError(f"export_type: expected text and/or db, got {self.export_type!r}")
        set_(self, "export_type", tuple(export))
        if self.storage_limit is not None and self.storage_limit_bytes < MIN_STORAGE_LIMIT_BYTES:
            raise ConfigError(f"storage_limit: {self.storage_limit} is below the minimum of 200MB")
        # The options that go straight into ExperimentalConfig are checked there, once.
        exp = self.experimental_config()
        set_(self, "gc_detect_threshold", exp.gc_detect_threshold)
        set_(self, "python_sampling_interval_ms", exp.python_sampling_interval_ms)

    def experimental_config(self, host_sys: tuple[str, ...] = ()) -> ExperimentalConfig:
        """The ExperimentalConfig of a profiled process (host_sys: what it samples itself)."""
        return ExperimentalConfig(
            profiler_level=self.level, export_type=self.export_type, gc_detect_threshold=self.gc_detect_threshold,
            python_sampling=self.python_sampling, python_sampling_interval_ms=self.python_sampling_interval_ms,
            record_modules=self.record_modules, host_sys=host_sys)

    @property
    def storage_limit_bytes(self) -> int | None:
        return None if self.storage_limit is None else parse_size(self.storage_limit)

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
        unknown = sorted(set(data) - {f.name for f in fields(cls)})
        if unknown:
            raise ConfigError(f"{OPTIONS_ENV}: unknown key(s) {', '.join(unknown)}")
        return cls(**data)

    # -- the CLI, generated from the fields -------------------------------------------
    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        for f in fields(cls):
            default = f.default if f.default is not MISSING else f.default_factory()  # type: ignore[misc]
            flag = "--" + f.name.replace("_", "-")
            shown = ",".join(default) if isinstance(default, tuple) else default
            help_text = f"{f.metadata['help']} (default: {shown})"
            if isinstance(default, bool):
                parser.add_argument(flag, dest=f.name, action=argparse.BooleanOptionalAction, default=default,
                                    help=help_text)
            elif f.name == "gc_detect_threshold":
                parser.add_argument(flag, dest=f.name, type=_float_or_none, default=default, help=help_text)
            elif isinstance(default, float):
                parser.add_argument(flag, dest=f.name, type=float, default=default, help=help_text)
            elif isinstance(default, int):
                parser.add_argument(flag, dest=f.name, type=int, default=default, help=help_text)
            elif isinstance(default, tuple):
                choices = _LIST_CHOICES.get(f.name)
                parser.add_argument(flag, dest=f.name, action=ListOption, choices=choices, default=default,
                                    help=help_text + " (a comma list, or repeat the option)")
            else:
                parser.add_argument(flag, dest=f.name, default=shown, help=help_text)

    @classmethod
    def from_namespace(cls, args: argparse.Namespace) -> "RunOptions":
        return cls(**{f.name: getattr(args, f.name) for f in fields(cls)})
