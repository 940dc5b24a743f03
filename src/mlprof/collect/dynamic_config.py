"""profiler_config.json of dynamic profiling (seed 001's dynamic_profile).

One typed definition of the file's keys, their defaults and their checks; a
file that fails any check is rejected whole with the reason.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..config import ExperimentalConfig, ProfilerActivity, check_activities
from ..errors import ConfigError

__all__ = ["DynamicConfig", "CONFIG_FILE_NAME", "read_config_file", "template", "MAX_ACTIVE_STEPS"]

CONFIG_FILE_NAME = "profiler_config.json"
# Ascend-only experimental keys of the seed: accepted so torch_npu configs load, then ignored.
ASCEND_ONLY_KEYS = ("aic_metrics", "l2_cache", "op_attr", "record_op_args")
MAX_CONFIG_BYTES = 1 << 20
# Where dynamic profiling departs from the API's ExperimentalConfig defaults: GC
# pauses are cheap to watch and explain many slow steps, so they are on.
EXPERIMENTAL_DEFAULTS: dict[str, Any] = {"gc_detect_threshold": 1.0}
# Longest capture a config edit can ask for: a running job must not be
# profiled (and slowed) for hours by one typo.
MAX_ACTIVE_STEPS = 1000


@dataclass(frozen=True)
class DynamicConfig:
    # Which sides to record: any of "CPU", "CUDA".
    activities: tuple[str, ...] = ("CPU",)
    # Where captures go; relative paths are taken from the job's working directory.
    prof_dir: str = "./"
    # Parse each capture in a child process once it is written.
    analyse: bool = False
    record_shapes: bool = False
    profile_memory: bool = False
    with_stack: bool = False
    with_flops: bool = False
    with_modules: bool = False
    # Steps recorded per capture, after `warmup` unrecorded warm-up steps; at
    # most MAX_ACTIVE_STEPS (more is cut down, and logged). 0 cancels the
    # capture that is running (and any queued one) and starts none.
    active: int = 1
    warmup: int = 0
    # First step to record; 0 means "as soon as possible" (aligned across ranks).
    start_step: int = 0
    # With is_rank, only the ranks in rank_list collect.
    is_rank: bool = False
    rank_list: tuple[int, ...] = ()
    # Key/value pairs written to profiler_metadata.json.
    metadata: dict[str, Any] = field(default_factory=dict)
    experimental_config: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _check_bools(self, ("analyse", "record_shapes", "profile_memory", "with_stack", "with_flops",
                            "with_modules", "is_rank"))
        _check_int(self.active, "active", 0)
        _check_int(self.warmup, "warmup", 0)
        _check_int(self.start_step, "start_step", 0)
        if not isinstance(self.activities, (list, tuple)) or not all(isinstance(a, str) for a in self.activities):
            raise ConfigError(f"activities: expected a list like [\"CPU\", \"CUDA\"], got {self.activities!r}")
        object.__setattr__(self, "activities", tuple(self.activities))
        check_activities(self.activities)
        if not isinstance(self.rank_list, (list, tuple)) or not all(
            isinstance(r, int) and not isinstance(r, bool) and r >= 0 for r in self.rank_list
        ):
            raise ConfigError(f"rank_list: expected a list of rank numbers, got {self.rank_list!r}")
        object.__setattr__(self, "rank_list", tuple(self.rank_list))
        if not isinstance(self.metadata, dict):
            raise ConfigError(f"metadata: expected an object, got {type(self.metadata).__name__}")
        if not isinstance(self.prof_dir, str) or not self.prof_dir:
            raise ConfigError(f"prof_dir: expected a directory path, got {self.prof_dir!r}")
        if ".." in Path(self.prof_dir).parts:
            raise ConfigError(f"prof_dir: {self.prof_dir!r} climbs out with '..', which is refused")
        if not isinstance(self.experimental_config, dict):
            raise ConfigError("experimental_config: expected an object")
        self.experimental()  # validates

    def experimental(self) -> ExperimentalConfig:
        options = {**EXPERIMENTAL_DEFAULTS,
                   **{k: v for k, v in self.experimental_config.items() if k not in ASCEND_ONLY_KEYS}}
        if "msprof_tx" in options:  # the seed's name for mstx
            options["mstx"] = options.pop("msprof_tx")
        return ExperimentalConfig.from_dict(options)

    def activity_enums(self) -> tuple[ProfilerActivity, ...]:
        return check_activities(self.activities)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["activities"] = list(self.activities)
        data["rank_list"] = list(self.rank_list)
        return data

    @classmethod
    def from_json(cls, data: Any) -> "DynamicConfig":
        if not isinstance(data, dict):
            raise ConfigError(f"expected a JSON object, got {type(data).__name__}")
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(f"unknown key(s): {', '.join(unknown)}")
        return cls(**data)


def _check_bools(obj: Any, names: tuple[str, ...]) -> None:
    for name in names:
        if not isinstance(getattr(obj, name), bool):
            raise ConfigError(f"{name}: expected true or false, got {getattr(obj, name)!r}")


def _check_int(value: Any, name: str, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(f"{name}: expected an integer >= {minimum}, got {value!r}")


def read_config_file(path: Path) -> DynamicConfig:
    """Read and validate the file; every refusal is a ConfigError with the reason."""
    if path.is_symlink():
        raise ConfigError(f"{path} is a symbolic link, which is refused")
    if not path.is_file():
        raise ConfigError(f"{path} is not a regular file")
    size = path.stat().st_size
    if size > MAX_CONFIG_BYTES:
        raise ConfigError(f"{path} is {size} bytes, more than a config file should be")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise ConfigError(f"{path} is not valid JSON: {exc}") from None
    return DynamicConfig.from_json(data)


def template() -> dict[str, Any]:
    """Every key with its default, as written by mlprof.dynamic.init()."""
    from ..config import supported_activities

    data = DynamicConfig(activities=tuple(a.name for a in supported_activities() if a.name != "NPU")).to_json()
    data["experimental_config"] = ExperimentalConfig(**EXPERIMENTAL_DEFAULTS).to_dict()
    return data


def write_template(path: Path) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(template(), indent=2) + "\n", encoding="utf-8")
    os.chmod(tmp, 0o640)
    os.replace(tmp, path)
