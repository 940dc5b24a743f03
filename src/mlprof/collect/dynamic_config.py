"""profiler_config.json of dynamic profiling (the Ascend PyTorch Profiler's dynamic_profile).

One typed definition of the file's keys, their defaults and their checks; a
file that fails any check is rejected whole with the reason.
"""

from __future__ import annotations

import json
import os
import stat
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from mlprof.errors import ConfigError
from mlprof.settings.profiler_config import (IGNORED_EXPERIMENTAL_KEYS, CollectOptions, ExperimentalConfig,
                                             ProfilerActivity)
from mlprof.settings.options import (DYNAMIC, EXPERIMENTAL, PROFILE, check_activities, check_fields, option_field,
                                     options_for, reject_unknown)

__all__ = ["DynamicConfig", "CONFIG_FILE_NAME", "read_config_file", "read_config_bytes", "parse_config",
           "template", "MAX_ACTIVE_STEPS", "MAX_WARMUP_STEPS", "MAX_START_STEP", "MAX_METADATA_DEPTH",
           "MAX_METADATA_BYTES"]

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
# Warm-up steps run under the profiler too (as slow as recorded ones), so they are bounded as well;
# torch's own examples warm up for 1-5 steps.
MAX_WARMUP_STEPS = 100
# A start step further away than this is a typo (1e8 steps is months of training at 10 steps/s),
# not a plan: refused, so it cannot hold a capture queued for the rest of the job.
MAX_START_STEP = 100_000_000
# metadata is copied into the trace and profiler_metadata.json by recursive encoders: deep nesting
# would raise RecursionError in the training thread, and a large value bloats every window.
MAX_METADATA_DEPTH = 16
MAX_METADATA_BYTES = 64 * 1024


def _field(key: str) -> Any:
    return option_field(DYNAMIC, key)


@dataclass(frozen=True)
class DynamicConfig:
    """profiler_config.json's keys: every field's default, help and check come from mlprof.settings.options."""

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
        if self.warmup > MAX_WARMUP_STEPS:
            raise ConfigError(f"warmup: at most {MAX_WARMUP_STEPS} steps, got {self.warmup}")
        if self.start_step > MAX_START_STEP:
            raise ConfigError(f"start_step: at most {MAX_START_STEP}, got {self.start_step}")
        _check_metadata(self.metadata)
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


def _check_metadata(metadata: dict[str, Any]) -> None:
    """At most MAX_METADATA_DEPTH levels and MAX_METADATA_BYTES of JSON (walked without recursion)."""
    stack: list[tuple[Any, int]] = [(metadata, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, (dict, list)):
            if depth > MAX_METADATA_DEPTH:
                raise ConfigError(f"metadata: nested more than {MAX_METADATA_DEPTH} levels deep")
            stack.extend((v, depth + 1) for v in (value.values() if isinstance(value, dict) else value))
    size = len(json.dumps(metadata, default=str))
    if size > MAX_METADATA_BYTES:
        raise ConfigError(f"metadata: {size} bytes of JSON, more than {MAX_METADATA_BYTES}")


def _kind(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def read_config_bytes(path: Path) -> bytes:
    """The file's bytes, read without ever blocking or reading without bound.

    Checked before it is opened (a symlink to /dev/zero would be read until memory runs out, a FIFO
    would block the reader until someone writes to it), and again on the open descriptor, which
    cannot follow a link or wait for a FIFO's writer: a file swapped in between is refused too.
    """
    try:
        st = os.lstat(path)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if not stat.S_ISREG(st.st_mode):
        raise ConfigError(f"{path} is {_kind(st.st_mode)}, not a regular file; refused")
    if st.st_size > MAX_CONFIG_BYTES:
        raise ConfigError(f"{path} is {st.st_size} bytes, more than a config file should be "
                          f"({MAX_CONFIG_BYTES})")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:  # ELOOP: it became a symlink since lstat
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise ConfigError(f"{path} is {_kind(mode)}, not a regular file; refused")
        chunks, left = [], MAX_CONFIG_BYTES + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 16))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > MAX_CONFIG_BYTES:
        raise ConfigError(f"{path} grew past {MAX_CONFIG_BYTES} bytes while read; refused")
    return data


def parse_config(data: bytes, path: Path) -> DynamicConfig:
    """Validate the bytes of the file at ``path``; every refusal is a ConfigError with the reason."""
    try:
        decoded = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise ConfigError(f"{path} is not valid JSON: {exc}") from None
    except RecursionError:
        raise ConfigError(f"{path}: JSON nested too deeply to read; refused") from None
    return DynamicConfig.from_json(decoded)


def read_config_file(path: Path) -> DynamicConfig:
    """Read and validate the file; every refusal is a ConfigError with the reason."""
    return parse_config(read_config_bytes(path), path)


def template() -> dict[str, Any]:
    """Every key with its default, as written by mlprof.dynamic.init()."""
    from mlprof.settings.profiler_config import supported_activities

    data = DynamicConfig(activities=tuple(a.name for a in supported_activities() if a.name != "NPU")).to_json()
    data["experimental_config"] = ExperimentalConfig(**EXPERIMENTAL_DEFAULTS).to_dict()
    return data


def write_template(path: Path) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(template(), indent=2) + "\n", encoding="utf-8")
    os.chmod(tmp, 0o640)
    os.replace(tmp, path)
