"""The option model: every collection option of mlprof, defined once.

Each :class:`Option` has a type, a default, a help text, the key it has in
config files and JSON, and (where it has one) its ``mlprof run`` flag. The
surfaces are derived from this list and validated through it:

- ``profile``: the keyword arguments of ``mlprof.profile`` (``CollectOptions``);
- ``experimental``: ``mlprof.ExperimentalConfig`` (also the ``experimental_config``
  object of the dynamic config file);
- ``run``: ``mlprof run`` flags, ``MLPROF_PROFILING_OPTIONS`` and the
  ``profile_options`` of a training config's profile section (``RunOptions``);
- ``dynamic``: the top-level keys of profiler_config.json (``DynamicConfig``).

An option may default differently per surface (``mlprof run`` turns on GC
detection, stack sampling and module recording; the API leaves them off).
Every check lives here, once: one boolean rule, one ``gc_detect_threshold``
rule, one spelling rule for export types.

No torch import: configs are built and checked on any machine.
``python -m mlprof.settings.options`` prints the docs' option tables.
"""

from __future__ import annotations

import argparse
import enum
import math
import re
from dataclasses import dataclass, field, fields
from typing import Any, Callable

from mlprof.settings._argparse import ListOption
from mlprof.errors import ConfigError, TorchUnavailableError

__all__ = [
    "Option", "OPTIONS", "ProfilerActivity", "ProfilerLevel", "ExportType", "HostSystem", "check_activities",
    "options_for", "option", "option_field", "check_fields", "check_bool", "check_int", "add_arguments",
    "markdown_table", "AUTO_ACTIVE", "parse_size", "storage_limit_bytes",
]

PROFILE, EXPERIMENTAL, RUN, DYNAMIC = "profile", "experimental", "run", "dynamic"
SURFACES = (PROFILE, EXPERIMENTAL, RUN, DYNAMIC)


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


# -- validators: each takes (value, option name) and returns the normalised value ------------

def check_bool(value: Any, name: str) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"{name}: expected true or false, got {value!r}")
    return value


def check_int(value: Any, name: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(f"{name}: expected an integer >= {minimum}, got {value!r}")
    return value


def _int_at_least(minimum: int) -> Callable[[Any, str], int]:
    def check(value: Any, name: str) -> int:
        return check_int(value, name, minimum)
    return check


# ``active`` of ``mlprof run``: record until the window's steps are evidence enough (schedule.WindowTargets).
AUTO_ACTIVE = "auto"


def _int_or_auto(value: Any, name: str) -> int | str:
    if isinstance(value, str) and value.strip().lower() == AUTO_ACTIVE:
        return AUTO_ACTIVE
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{name}: expected '{AUTO_ACTIVE}' or an integer >= 1, got {value!r}")
    return value


def _int_between(low: int, high: int, unit: str) -> Callable[[Any, str], int]:
    def check(value: Any, name: str) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise ConfigError(f"{name}: expected {low}-{high} {unit}, got {value!r}")
        return value
    return check


def _coerce_enum(enum_cls: type[enum.Enum], value: Any, name: str) -> Any:
    """An enum member from itself, its name or its value, in any case (``Text``, ``text``, ``ExportType.Text``)."""
    if isinstance(value, enum_cls):
        return value
    if isinstance(value, str):
        text = value.split(".")[-1].lower()
        for member in enum_cls:
            if text in (member.name.lower(), str(member.value).lower()):
                return member
    raise ConfigError(f"{name}: {value!r} is not one of {', '.join(m.name for m in enum_cls)}")


def _enum_list(enum_cls: type[enum.Enum], at_least_one: bool) -> Callable[[Any, str], tuple]:
    def check(value: Any, name: str) -> tuple:
        if isinstance(value, str):
            value = [v for v in value.split(",") if v.strip()]
        elif isinstance(value, enum_cls):
            value = (value,)
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{name}: expected a list, got {value!r}")
        result = tuple(dict.fromkeys(_coerce_enum(enum_cls, v.strip() if isinstance(v, str) else v, name)
                                     for v in value))
        if at_least_one and not result:
            raise ConfigError(f"{name}: choose at least one of {', '.join(m.name for m in enum_cls)}")
        return result
    return check


def check_level(value: Any, name: str) -> ProfilerLevel:
    return _coerce_enum(ProfilerLevel, value, name)


check_export_type = _enum_list(ExportType, at_least_one=True)
check_host_sys = _enum_list(HostSystem, at_least_one=False)


def check_gc_threshold(value: Any, name: str) -> float | None:
    """Milliseconds >= 0, or None (off). The one rule for gc_detect_threshold."""
    if value is None:
        return None
    if (isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value)
            or value < 0):
        raise ConfigError(f"{name}: expected milliseconds >= 0 or None, got {value!r}")
    return float(value)


# Below 0.5 ms the sampler thread would compete with the job for the GIL; above
# a second it would miss most steps.
MIN_SAMPLING_INTERVAL_MS = 0.5
MAX_SAMPLING_INTERVAL_MS = 1000.0


def check_sampling_interval(value: Any, name: str) -> float:
    if (isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value)
            or not MIN_SAMPLING_INTERVAL_MS <= value <= MAX_SAMPLING_INTERVAL_MS):
        raise ConfigError(f"{name}: expected milliseconds between {MIN_SAMPLING_INTERVAL_MS} "
                          f"and {MAX_SAMPLING_INTERVAL_MS}, got {value!r}")
    return float(value)


def _torch_npu_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("torch_npu") is not None


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


def check_activities(activities: Any, name: str = "activities") -> tuple[ProfilerActivity, ...]:
    """Validate an ``activities`` list; None means what this machine supports (CPU, plus CUDA when present)."""
    if activities is None:
        return tuple(supported_activities())
    if isinstance(activities, (str, ProfilerActivity)) or not hasattr(activities, "__iter__"):
        raise ConfigError(f"{name}: expected a list like [\"CPU\", \"CUDA\"], got {activities!r}")
    result = []
    for activity in activities:
        activity = _coerce_enum(ProfilerActivity, getattr(activity, "name", activity), name)
        if activity is ProfilerActivity.NPU and not _torch_npu_available():
            raise TorchUnavailableError(
                "ProfilerActivity.NPU needs torch_npu (Ascend), which is not installed; "
                "use ProfilerActivity.CPU and ProfilerActivity.CUDA"
            )
        result.append(activity)
    if not result:
        raise ConfigError(f"{name}: choose at least one of CPU, CUDA")
    return tuple(dict.fromkeys(result))


def _check_activity_names(value: Any, name: str) -> tuple[str, ...] | None:
    """The config file's spelling of activities: a list of names, kept as names (None: what the machine has)."""
    if value is None:
        return None
    if not isinstance(value, (list, tuple)) or not all(isinstance(a, str) for a in value):
        raise ConfigError(f"{name}: expected a list like [\"CPU\", \"CUDA\"], got {value!r}")
    check_activities(value, name)
    return tuple(value)


def _check_output(value: Any, name: str) -> str:
    from mlprof.capture.output_path import check_output_template

    return check_output_template(value, name)


MIN_STORAGE_LIMIT_BYTES = 200 * 1024 * 1024
_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt])?(i?b)?\s*$", re.IGNORECASE)
_UNITS = {"k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}


def parse_size(text: str | int, bare_unit: str = "") -> int | None:
    """'200MB', '1.5G', '512MiB', '500B' -> bytes (units of 1024); None when ``text`` is not a positive size
    of at most a pebibyte. A bare number (no unit, no B) counts in ``bare_unit``: '' bytes
    (``--memory-budget``, ``MLPROF_MEMORY_BUDGET``), 'm' megabytes (``storage_limit``, as msprof's
    ``--storage-limit``). The one reader of sizes: every option and variable that takes one uses it."""
    if isinstance(text, bool):
        return None
    match = _SIZE_RE.match(str(text))
    if not match:
        return None
    number, unit, byte_suffix = float(match.group(1)), match.group(2), match.group(3)
    if unit is None:
        unit = "" if byte_suffix else bare_unit
    size = int(number * _UNITS.get(unit.lower(), 1))
    return size if 0 < size <= _UNITS["t"] * 1024 else None


def storage_limit_bytes(value: str | int, name: str = "storage_limit") -> int:
    """A ``storage_limit`` in bytes (a bare number is megabytes); ConfigError when it is not a size."""
    size = parse_size(value, bare_unit="m")
    if size is None:
        raise ConfigError(f"{name}: {value!r} is not a size like 200MB or 2GB")
    return size


def _check_storage_limit(value: Any, name: str) -> str | None:
    if value is None:
        return None
    if storage_limit_bytes(value, name) < MIN_STORAGE_LIMIT_BYTES:
        raise ConfigError(f"{name}: {value} is below the minimum of 200MB")
    return value


def _check_prof_dir(value: Any, name: str) -> str:
    from pathlib import Path

    if not isinstance(value, str) or not value:
        raise ConfigError(f"{name}: expected a directory path, got {value!r}")
    if ".." in Path(value).parts:
        raise ConfigError(f"{name}: {value!r} climbs out with '..', which is refused")
    return value


def _check_rank_list(value: Any, name: str) -> tuple[int, ...]:
    if not isinstance(value, (list, tuple)) or not all(
            isinstance(r, int) and not isinstance(r, bool) and r >= 0 for r in value):
        raise ConfigError(f"{name}: expected a list of rank numbers, got {value!r}")
    return tuple(value)


def _check_object(value: Any, name: str) -> dict:
    if not isinstance(value, dict):
        raise ConfigError(f"{name}: expected an object, got {type(value).__name__}")
    return value


# -- the field list ------------------------------------------------------------------------------



@dataclass(frozen=True)
class Option:
    """One option: its key (Python keyword, JSON and config-file key), type and default, help, check."""

    name: str
    kind: str  # bool, int, int_or_auto, float, float_or_none, choice, list, str, str_or_none, object
    default: Any
    help: str
    check: Callable[[Any, str], Any]
    surfaces: tuple[str, ...]
    # Surface -> default where it differs from ``default`` (the API's).
    defaults: dict[str, Any] = field(default_factory=dict)
    # Surface -> key where the surface spells it differently (mlprof run's ``level``).
    keys: dict[str, str] = field(default_factory=dict)
    choices: tuple[str, ...] = ()

    def key(self, surface: str) -> str:
        return self.keys.get(surface, self.name)

    def default_for(self, surface: str) -> Any:
        return self.defaults.get(surface, self.default)

    def flag(self, surface: str = RUN) -> str:
        return "--" + self.key(surface).replace("_", "-")


_COLLECT = (PROFILE, RUN, DYNAMIC)
_EXP_RUN = (EXPERIMENTAL, RUN)

OPTIONS: tuple[Option, ...] = (
    # What to record (mlprof.profile's own keywords).
    Option("activities", "list", None, "sides to record: CPU, CUDA (NPU needs torch_npu); "
           "default: what this machine has", _check_activity_names, (PROFILE, RUN, DYNAMIC),
           defaults={DYNAMIC: ("CPU",)}, choices=("CPU", "CUDA", "NPU")),
    Option("record_shapes", "bool", False, "record op input shapes", check_bool, _COLLECT),
    Option("profile_memory", "bool", False, "record memory allocations", check_bool, _COLLECT),
    Option("with_stack", "bool", False, "record Python call stacks of ops", check_bool, _COLLECT),
    Option("with_modules", "bool", False, "record the module hierarchy of ops", check_bool, _COLLECT),
    Option("with_flops", "bool", False, "estimate FLOPs of matmul/conv ops", check_bool, _COLLECT),
    # ExperimentalConfig.
    Option("profiler_level", "choice", ProfilerLevel.Level0, "profiler level: Level_none, Level0, Level1, Level2",
           check_level, _EXP_RUN, keys={RUN: "level"}, choices=tuple(ProfilerLevel.__members__)),
    Option("export_type", "list", (ExportType.Text,), "result formats after parsing: text, db",
           check_export_type, _EXP_RUN, choices=tuple(e.value for e in ExportType)),
    Option("mstx", "bool", True, "record mlprof.mstx marks and ranges (torch_npu's msprof_tx)", check_bool,
           _EXP_RUN),
    Option("gc_detect_threshold", "float_or_none", None,
           "record Python GC pauses of at least this many ms ('none': off; 0: every pause)",
           check_gc_threshold, _EXP_RUN, defaults={RUN: 1.0, DYNAMIC: 1.0}),
    Option("host_sys", "list", (), "host resources to sample: cpu,mem,disk,network", check_host_sys, _EXP_RUN,
           defaults={RUN: (HostSystem.CPU, HostSystem.MEM)}, choices=tuple(h.value for h in HostSystem)),
    Option("host_sys_freq", "int", 10, "host sampling frequency in Hz (1-50)", _int_between(1, 50, "Hz"), _EXP_RUN),
    Option("python_sampling", "bool", False, "sample the training thread's Python stack (python_samples.json)",
           check_bool, _EXP_RUN, defaults={RUN: True}),
    Option("python_sampling_interval_ms", "float", 10.0, "Python stack sampling period in ms (0.5-1000)",
           check_sampling_interval, _EXP_RUN),
    Option("record_modules", "bool", False, "record nn.Module forward calls with their paths (modules.json)",
           check_bool, _EXP_RUN, defaults={RUN: True}),
    Option("monitor", "bool", False, "monitor mode: time every step of the job (job_steps.csv) and open "
           "detailed windows where steps turn anomalous, plus a baseline window early (docs/monitor.md)",
           check_bool, _EXP_RUN),
    Option("monitor_max_windows", "int", 5, "monitor mode: most windows per capture, the baseline one included",
           _int_at_least(1), _EXP_RUN),
    # mlprof run and MLPROF_PROFILING_OPTIONS: where and when.
    Option("output", "str", "./mlprof_result", "directory for the captures (one per process/rank); {id} or {rank} "
           "in it: each rank's own directory", _check_output, (RUN,)),
    Option("skip_first", "int", 5, "steps to skip before the first cycle (let the job reach steady state)",
           _int_at_least(0), (RUN,)),
    Option("wait", "int", 0, "idle steps at the start of each cycle", _int_at_least(0), (RUN,)),
    Option("warmup", "int", 1, "profiled but unrecorded steps before each recorded window", _int_at_least(0),
           (RUN, DYNAMIC), defaults={DYNAMIC: 0}),
    Option("active", "int_or_auto", AUTO_ACTIVE, "steps recorded per window; 'auto': until the window holds "
           "20 steps and 2 s of them (at least 5 steps, at most 200 or 60 s)", _int_or_auto, (RUN,)),
    Option("repeat", "int", 1, "number of windows (0: until the job ends)", _int_at_least(0), (RUN,)),
    Option("storage_limit", "str_or_none", None, "age out the oldest capture data past this size (>= 200MB), "
           "e.g. 2GB", _check_storage_limit, (RUN,)),
    # profiler_config.json (dynamic profiling).
    Option("prof_dir", "str", "./", "where captures go; relative to the job's working directory", _check_prof_dir,
           (DYNAMIC,)),
    Option("analyse", "bool", False, "parse each capture in a child process once it is written", check_bool,
           (DYNAMIC,)),
    Option("active", "int", 1, "steps recorded per capture (at most 1000); 0 cancels the running capture",
           _int_at_least(0), (DYNAMIC,)),
    Option("start_step", "int", 0, "first step to record; 0: as soon as possible (aligned across ranks)",
           _int_at_least(0), (DYNAMIC,)),
    Option("is_rank", "bool", False, "with is_rank, only the ranks in rank_list collect", check_bool, (DYNAMIC,)),
    Option("rank_list", "list", (), "the ranks that collect when is_rank is true", _check_rank_list, (DYNAMIC,)),
    Option("metadata", "object", None, "key/value pairs written to profiler_metadata.json", _check_object,
           (DYNAMIC,)),
)


def options_for(surface: str) -> tuple[Option, ...]:
    """The options of one surface, in declaration order."""
    if surface not in SURFACES:
        raise ValueError(f"unknown surface {surface!r}")
    return tuple(o for o in OPTIONS if surface in o.surfaces)


def option(surface: str, key: str) -> Option:
    for opt in options_for(surface):
        if opt.key(surface) == key:
            return opt
    raise KeyError(f"{surface} has no option {key!r}")


def option_field(surface: str, key: str, default_surface: str | None = None) -> Any:
    """A dataclass field for ``key`` of ``surface``, carrying its Option and default."""
    opt = option(surface, key)
    default = opt.default_for(default_surface or surface)
    meta = {"option": opt, "surface": surface}
    if default is None and opt.kind == "object":
        return field(default_factory=dict, metadata=meta)
    if isinstance(default, (list, dict, set)):
        return field(default_factory=lambda: type(default)(default), metadata=meta)
    return field(default=default, metadata=meta)


def check_fields(obj: Any) -> None:
    """Validate and normalise every option field of a frozen dataclass, once, in ``__post_init__``."""
    for f in fields(obj):
        opt = f.metadata.get("option")
        if opt is not None:
            object.__setattr__(obj, f.name, opt.check(getattr(obj, f.name), f.name))


def reject_unknown(data: dict, known: set[str] | frozenset[str], what: str) -> None:
    unknown = sorted(set(data) - set(known))
    if unknown:
        raise ConfigError(f"{what}unknown key(s) {', '.join(map(str, unknown))}")


# -- derived: argparse flags and docs tables ------------------------------------------------------

def _shown(value: Any) -> Any:
    if isinstance(value, enum.Enum):
        return value.name if isinstance(value, ProfilerLevel) else value.value
    if isinstance(value, tuple):
        return ",".join(str(_shown(v)) for v in value)
    return value


def _float_or_none(text: str) -> float | None:
    """A CLI number that can be switched off: 'none' or 'off' -> None."""
    if text.strip().lower() in ("none", "off"):
        return None
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of ms or 'none', got {text!r}") from None


def _cli_int_or_auto(text: str) -> int | str:
    try:
        return _int_or_auto(text, "value")
    except ConfigError:
        raise argparse.ArgumentTypeError(f"expected '{AUTO_ACTIVE}' or a whole number >= 1, got {text!r}") from None


def cli_default(opt: Option, surface: str = RUN) -> Any:
    """The default as the CLI's namespace holds it (plain strings for enums)."""
    value = opt.default_for(surface)
    if isinstance(value, tuple):
        return tuple(_shown(v) for v in value)
    return _shown(value)


def add_arguments(parser: argparse.ArgumentParser, surface: str = RUN) -> None:
    """One flag per option of ``surface`` (``--kebab-case``), with its help and default."""
    for opt in options_for(surface):
        dest, flag, default = opt.key(surface), opt.flag(surface), cli_default(opt, surface)
        shown = ",".join(default) if isinstance(default, tuple) else default
        help_text = f"{opt.help} (default: {shown})"
        if opt.kind == "bool":
            parser.add_argument(flag, dest=dest, action=argparse.BooleanOptionalAction, default=default,
                                help=help_text)
        elif opt.kind == "float_or_none":
            parser.add_argument(flag, dest=dest, type=_float_or_none, default=default, help=help_text)
        elif opt.kind == "float":
            parser.add_argument(flag, dest=dest, type=float, default=default, help=help_text)
        elif opt.kind == "int":
            parser.add_argument(flag, dest=dest, type=int, default=default, help=help_text)
        elif opt.kind == "int_or_auto":
            parser.add_argument(flag, dest=dest, type=_cli_int_or_auto, default=default, help=help_text)
        elif opt.kind == "list":
            parser.add_argument(flag, dest=dest, action=ListOption, choices=opt.choices or None, default=default,
                                help=help_text + " (a comma list, or repeat the option)")
        else:
            parser.add_argument(flag, dest=dest, default=shown, help=help_text)


def markdown_table(surface: str) -> str:
    """The docs' option table of ``surface``, as docs/run.md and docs/collection.md hold it."""
    if surface == RUN:
        rows = ["| flag / key | default | meaning |", "|---|---|---|"]
        for opt in options_for(RUN):
            key, default = opt.key(RUN), cli_default(opt)
            if opt.kind == "bool":
                flag = f"`{opt.flag()}` / `--no-{opt.flag()[2:]}`"
                shown = "on" if default else "off"
            else:
                flag = f"`{opt.flag()}`"
                shown = "none" if default is None else f"`{','.join(default) if isinstance(default, tuple) else default}`"
            rows.append(f"| {flag} / `{key}` | {shown} | {opt.help} |")
        return "\n".join(rows)
    rows = ["| field | default | meaning |", "|---|---|---|"]
    for opt in options_for(surface):
        default = opt.default_for(surface)
        shown = f"`{list(_shown(v) for v in default)}`" if isinstance(default, tuple) else f"`{_shown(default)}`"
        rows.append(f"| `{opt.key(surface)}` | {shown} | {opt.help} |")
    return "\n".join(rows)


def _main() -> None:  # pragma: no cover - a docs helper
    import sys

    for surface in sys.argv[1:] or [RUN, EXPERIMENTAL]:
        print(f"<!-- options:{surface} (generated by python -m mlprof.settings.options {surface}) -->")
        print(markdown_table(surface))
        print(f"<!-- /options:{surface} -->")


if __name__ == "__main__":  # pragma: no cover
    _main()
