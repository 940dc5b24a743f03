"""profiler_config.json of dynamic profiling (the Ascend PyTorch Profiler's dynamic_profile).

One typed definition of the file's keys, their defaults and their checks; a
file that fails any check is rejected whole with the reason.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..config import IGNORED_EXPERIMENTAL_KEYS, CollectOptions, ExperimentalConfig, ProfilerActivity
from ..errors import ConfigError
from ..options import DYNAMIC, EXPERIMENTAL, PROFILE, check_activities, check_fields, option_field, options_for, \
    reject_unknown

__all__ = ["DynamicConfig", "CONFIG_FILE_NAME", "read_config_file", "template", "MAX_ACTIVE_STEPS"]

CONFIG_FILE_NAME = "profiler_config.json"
# Ascend-only experimental keys of the seed: accepted so torch_npu configs load, then ignored.
ASCEND_ONLY_KEYS = ("aic_metrics", "l2_cache", "op_attr", "record_op_args")
MAX_CONFIG_BYTES = 1 << 20
# Where dynamic profiling departs from the API's ExperimentalConfig defaults (from the option
# model): GC pauses are cheap to watch and explain many slow steps, so they are on.
EXPERIMENTAL_DEFAULTS: dict[str, Any] = {
    o.name: o.default_for(DYNAMIC) for o in options_for(EXPERIMENTAL) if DYNAMIC in o.defaults}
# Longest capture a config edit can ask for: a running job must not be
# profiled (and slowed) for hours by one typo.
MAX_ACTIVE_STEPS = 1000


def _field(key: str) -> Any:
    return option_field(DYNAMIC, key)


@dataclass(frozen=True)
class DynamicConfig:
    """profiler_config.json's keys: every field's default, help and check come from mlprof.options."""

    activities: tuple[str, ...] = _field("activities")
    prof_dir: str = _field("prof_dir")
    analyse: bool = _field("analyse")
    record_shapes: bool = _field("record_shapes")
    profile_memory: bool = _field("profile_memory")
    with_stack: bool = _field("with_stack")
    with_flops: bool = _field("with_flops")
    with_modules: bool = _field("with_modules")
    # At most MAX_ACTIVE_STEPS (more is cut down, and logged); 0 cancels.
    active: int = _field("active")
    warmup: int = _field("warmup")
    start_step: int = _field("start_step")
    is_rank: bool = _field("is_rank")
    rank_list: tuple[int, ...] = _field("rank_list")
    metadata: dict[str, Any] = _field("metadata")
    # As mlprof.ExperimentalConfig (validated through it), with the defaults above.
    experimental_config: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_fields(self)
        if not isinstance(self.experimental_config, dict):
            raise ConfigError("experimental_config: expected an object")
        self.experimental()  # validates

    def experimental(self) -> ExperimentalConfig:
        options = {**EXPERIMENTAL_DEFAULTS,
                   **{k: v for k, v in self.experimental_config.items()
                      if k not in ASCEND_ONLY_KEYS and k not in IGNORED_EXPERIMENTAL_KEYS}}
        if "msprof_tx" in options:  # the seed's name for mstx
            options["mstx"] = options.pop("msprof_tx")
        return ExperimentalConfig.from_dict(options)

    def activity_enums(self) -> tuple[ProfilerActivity, ...]:
        return check_activities(self.activities)

    def collect_options(self) -> CollectOptions:
        """What ``mlprof.profile`` is given for a capture of this config."""
        return CollectOptions(activities=self.activity_enums(), experimental_config=self.experimental(),
                              **{o.name: getattr(self, o.name) for o in options_for(DYNAMIC)
                                 if PROFILE in o.surfaces and o.name != "activities"})

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["activities"] = list(self.activities)
        data["rank_list"] = list(self.rank_list)
        return data

    @classmethod
    def from_json(cls, data: Any) -> "DynamicConfig":
        if not isinstance(data, dict):
            raise ConfigError(f"expected a JSON object, got {type(data).__name__}")
        reject_unknown(data, set(cls.__dataclass_fields__), "")
        return cls(**data)


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
