"""Profiling switched on from a training config (MindFormers' ``profile`` keys).

One section of a YAML or JSON training config, mapped here, once, onto
:class:`~mlprof.collect.run_options.RunOptions` (the options of ``mlprof run``
and ``MLPROF_PROFILING_OPTIONS``). Read by ``mlprof.profile_from_config``,
``mlprof run --config FILE`` and the trainer integrations' ``config=``.

    profile: true                  # the switch (default false, as in mindformers)
    profile_start_step: 5          # first recorded step, counted from 1 like the trainer's steps
    profile_stop_step: 7           # last recorded step
    init_start_profile: false      # true: record from the moment profiling starts; start_step is ignored
    profile_communication: true    # collective names, sizes and groups (record_shapes)
    profile_memory: false          # allocations and frees
    profile_output_path: ./output/profile/rank_{id}    # {id} (or {rank}): the process's rank
                                   # (seed 003's name, output_path, works too)
    profile_options: {level: Level1, export_type: [text, db]}    # any other mlprof option

Keys that do not mention "profil" belong to the rest of the training config
and are ignored, so a whole training config can be given; an unknown key
that does (a typo such as ``profile_stop_setp``) is refused.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from mlprof.capture.output_path import check_output_template
from mlprof.collect.run_options import RunOptions
from mlprof.errors import ConfigError
from mlprof.settings.options import AUTO_ACTIVE, _int_at_least, check_bool

__all__ = ["ProfileConfig", "load_profile_config", "trainer_run_options", "first_recorded_step", "SECTION_DEFAULTS"]

# The section's keys and their defaults (seed 003's, except the output path's
# name: mindformers derives it from its own output_dir; here it is explicit).
SECTION_DEFAULTS: dict[str, Any] = {
    "profile": False,
    "profile_start_step": 1,
    "profile_stop_step": 10,
    "init_start_profile": True,
    "profile_communication": False,
    "profile_memory": False,
    "profile_output_path": "./output/profile/rank_{id}",
    "profile_options": {},
}
# Seed 003's name for the output directory (its default, ./output/profile/rank_{id}/profiler/, is
# mindformers'): taken as profile_output_path. It does not mention "profil", so it is looked for by name.
SEED_OUTPUT_KEY = "output_path"
# RunOptions keys that the section's own keys decide, and which key that is.
_DECIDED = {
    "skip_first": "profile_start_step", "wait": "profile_start_step", "active": "profile_stop_step",
    "repeat": "profile_stop_step (one window)", "output": "profile_output_path", "profile_memory": "profile_memory",
}
MAX_CONFIG_BYTES = 1 << 20


@dataclass(frozen=True)
class ProfileConfig:
    """A validated profile section."""

    enabled: bool
    start_step: int  # first recorded step (1 with init_start_profile)
    stop_step: int
    init_start: bool
    options: RunOptions
    source: str  # the file, or "config" for a dict: for messages


def first_recorded_step(options: RunOptions) -> int:
    """The first trainer step (counted from 1) an integration's window records."""
    return options.skip_first + options.wait + options.warmup + 1


def last_recorded_step(options: RunOptions) -> int | None:
    """The last trainer step of the first window; None for a window sized by evidence (known as it runs)."""
    if options.active == AUTO_ACTIVE:
        return None
    return first_recorded_step(options) + options.active - 1


def recorded_steps_text(options: RunOptions, first: int) -> str:
    """'8-10' for a fixed window starting at ``first``, '8 on' for a window sized by evidence."""
    if options.active == AUTO_ACTIVE:
        return f"{first} on"
    return f"{first}-{first + options.active - 1}"


def _check_int(value: Any, name: str, minimum: int) -> int:
    return _int_at_least(minimum)(value, name)


def trainer_run_options(output: str, start_step: int | None = None, **options: Any) -> RunOptions:
    """The integrations' keywords as RunOptions: ``start_step`` (counted from 1, like a
    trainer's steps) becomes ``skip_first``; warm-up steps that do not fit before it are dropped."""
    known = {f.name for f in fields(RunOptions)}
    unknown = sorted(set(options) - known)
    if unknown:
        raise ConfigError(f"unknown mlprof option(s) {', '.join(unknown)}; known: start_step, "
                          f"{', '.join(sorted(known - {'output', 'skip_first'}))} (docs/run.md)")
    if "output" in options:
        raise ConfigError("output: give the directory as the integration's output_dir (or dirpath)")
    if start_step is not None:
        if "skip_first" in options:
            raise ConfigError("give start_step or skip_first, not both")
        _check_int(start_step, "start_step", 1)
        defaults = RunOptions()
        wait = _check_int(options.get("wait", defaults.wait), "wait", 0)
        warmup = _check_int(options.get("warmup", defaults.warmup), "warmup", 0)
        room = start_step - 1
        if wait > room:
            raise ConfigError(f"start_step {start_step}: only {room} step(s) come before it, fewer than wait={wait}")
        warmup = min(warmup, room - wait)  # step 1 cannot be warmed up for
        options = {**options, "wait": wait, "warmup": warmup, "skip_first": room - wait - warmup}
    return RunOptions(output=check_output_template(str(output)), **_tuples(options))


def _tuples(options: dict[str, Any]) -> dict[str, Any]:
    # YAML and JSON give lists where RunOptions keeps tuples (host_sys, export_type).
    return {k: tuple(v) if isinstance(v, list) else v for k, v in options.items()}


def load_profile_config(config: str | os.PathLike | Mapping) -> ProfileConfig:
    """Read and validate a profile section: a file (.yaml/.yml/.json) or a dict.

    Every refusal is a ConfigError naming the file and the key.
    """
    data, source = _read(config)
    try:
        return _from_mapping(data, source)
    except ConfigError as exc:
        raise ConfigError(f"{source}: {exc}") from None


def _from_mapping(data: Mapping, source: str) -> ProfileConfig:
    section = {k: v for k, v in data.items() if isinstance(k, str) and "profil" in k.lower()}
    unknown = sorted(set(section) - set(SECTION_DEFAULTS))
    if unknown:
        raise ConfigError(f"unknown profile key(s) {', '.join(unknown)}; known: {', '.join(SECTION_DEFAULTS)}, "
                          f"{SEED_OUTPUT_KEY}")
    output_key = "profile_output_path"
    if SEED_OUTPUT_KEY in data:
        if output_key in section:
            raise ConfigError(f"{SEED_OUTPUT_KEY} and {output_key} both name the output directory; keep one")
        output_key = SEED_OUTPUT_KEY
        section[SEED_OUTPUT_KEY] = data[SEED_OUTPUT_KEY]
    values = {**SECTION_DEFAULTS, **section}
    output = values.get(output_key, SECTION_DEFAULTS["profile_output_path"])
    for name in ("profile", "init_start_profile", "profile_communication", "profile_memory"):
        check_bool(values[name], name)
    start = _check_int(values["profile_start_step"], "profile_start_step", 1)
    stop = _check_int(values["profile_stop_step"], "profile_stop_step", 1)
    init = values["init_start_profile"]
    if init:
        start = 1  # seed 003: with init_start_profile, profile_start_step has no effect
    if stop < start:
        raise ConfigError(f"profile_stop_step: {stop} is before profile_start_step {start}")
    extra = values["profile_options"]
    if extra is None:
        extra = {}
    if not isinstance(extra, Mapping):
        raise ConfigError(f"profile_options: expected a mapping of mlprof options, got {type(extra).__name__}")
    known = {f.name for f in fields(RunOptions)}
    unknown = sorted(k for k in extra if k not in known)
    if unknown:
        raise ConfigError(f"profile_options: unknown option(s) {', '.join(map(str, unknown))}; known: "
                          f"{', '.join(sorted(known - set(_DECIDED)))} (docs/run.md)")
    for key in extra:
        if key in _DECIDED:
            raise ConfigError(f"profile_options.{key}: set by {_DECIDED[key]} in this section")
    extra = dict(extra)
    if init and "warmup" in extra:
        raise ConfigError("profile_options.warmup: init_start_profile records from the start, without warm-up")
    if init:
        extra["warmup"] = 0
    if values["profile_communication"]:
        # Collective names, message sizes and groups come with the recorded shapes (docs/collection.md, Level1).
        extra["record_shapes"] = True
    options = trainer_run_options(check_output_template(output, output_key),
                                  start_step=start, active=stop - start + 1, repeat=1,
                                  profile_memory=values["profile_memory"], **extra)
    return ProfileConfig(enabled=values["profile"], start_step=start, stop_step=stop, init_start=init,
                         options=options, source=source)


def _read(config: Any) -> tuple[Mapping, str]:
    if isinstance(config, Mapping):
        return config, "config"
    if not isinstance(config, (str, os.PathLike)):
        raise ConfigError(f"a profile config is a file path or a dict, not {type(config).__name__}")
    path = Path(config)
    if path.is_symlink():
        raise ConfigError(f"{path}: a symbolic link, which is refused")
    if not path.is_file():
        raise ConfigError(f"{path}: no such config file")
    if path.stat().st_size > MAX_CONFIG_BYTES:
        raise ConfigError(f"{path}: larger than {MAX_CONFIG_BYTES} bytes; not a config file")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read: {getattr(exc, 'strerror', None) or exc}") from None
    suffix = path.suffix.lower()
    if suffix == ".json":
        data = _json(path, text)
    elif suffix in (".yaml", ".yml"):
        data = _yaml(path, text)
    else:
        try:
            data = json.loads(text)
        except ValueError:
            data = _yaml(path, text)
    if not isinstance(data, Mapping):
        raise ConfigError(f"{path}: expected a mapping of keys at the top, got {type(data).__name__}")
    return data, str(path)


def _json(path: Path, text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as exc:
        raise ConfigError(f"{path}: not valid JSON: {exc}") from None


def _yaml(path: Path, text: str) -> Any:
    try:
        import yaml
    except ImportError:
        raise ConfigError(f"{path}: reading YAML needs PyYAML (pip install pyyaml); or write the config as JSON") \
            from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {' '.join(str(exc).split())}") from None
