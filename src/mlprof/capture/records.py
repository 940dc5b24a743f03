"""The typed records of the raw capture: one msgspec Struct per file kind (docs/capture_format.md).

The collector encodes these structs (``encode``) and every reader decodes
into them (``decode_file``), so a field is spelled once for both sides.
Field order is the on-disk key order. Structs are ``kw_only`` so that a
required field may follow optional ones without changing that order.

Per-event recording stays in plain lists and dicts (cheap appends, see
``collect.recorder``); a window's lists become these structs once, at window
end, and are encoded in one call.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Annotated, Any, TypeVar, Union

import msgspec

from mlprof.capture import layout
from mlprof.errors import CaptureError

__all__ = ["Int", "Clock", "Versions", "WindowEntry", "StepTimes", "Manifest", "CaptureMetadata", "WindowInfo",
           "StepRecord", "MarkRecord", "RangeRecord", "MarkersFile", "GcRecord", "PythonSamplesFile",
           "ModulesFile", "ScalarsSegment", "HostProcess", "GpuSample", "HostSample", "encode", "decode_file", "convert", "read_manifest"]

# Every integer must fit the tables' int64 columns (hostile or corrupt files).
Int = Annotated[int, msgspec.Meta(ge=-(2**62), le=2**62)]

T = TypeVar("T")


class _Record(msgspec.Struct, kw_only=True):
    pass


# -- profiler_info.json ---------------------------------------------------------------------------
class Clock(_Record, kw_only=True):
    """Wall and monotonic clocks read at the same instant."""

    wall_ns: Union[Int, None] = None
    monotonic_ns: Union[Int, None] = None


class Versions(_Record, kw_only=True):
    mlprof: Union[str, None] = None
    torch: Union[str, None] = None
    python: Union[str, None] = None


class WindowEntry(_Record, kw_only=True):
    """A finished window as listed in the manifest (its own window.json is the authority)."""

    dir: Union[str, None] = None
    index: Union[Int, None] = None
    status: Union[str, None] = None
    first_step: Union[Int, None] = None
    last_step: Union[Int, None] = None
    start_ns: Union[Int, None] = None
    end_ns: Union[Int, None] = None


class StepTimes(_Record, kw_only=True):
    """Median wall time of the steps the profiler recorded and of warm steps it did not (collect.step_times)."""

    profiled_median_ns: Int
    unprofiled_median_ns: Int
    profiled_steps: Int
    unprofiled_steps: Int


class Manifest(_Record, kw_only=True):
    """``profiler_info.json``, the capture's manifest. Every field may be absent in a file."""

    schema_version: Int = layout.SCHEMA_VERSION
    kind: str = "mlprof.capture"
    status: str = layout.STATUS_RUNNING
    worker_name: Union[str, None] = None
    host: Union[str, None] = None
    pid: Union[Int, None] = None
    rank: Union[Int, None] = None
    world_size: Union[Int, None] = None
    local_rank: Union[Int, None] = None
    versions: Union[Versions, None] = None
    config: Union[dict[str, Any], None] = None  # every profile() option
    clock: Union[Clock, None] = None
    created_wall_ns: Union[Int, None] = None
    windows: Union[list[WindowEntry], None] = msgspec.field(default_factory=list)
    error: Union[str, None] = None
    steps_seen: Union[Int, None] = None  # written at stop(): the last profiler step reached
    step_times: Union[StepTimes, None] = None  # written at stop(): profiled vs unprofiled step medians
    # The job's last step and when it ended: written at stop(), and under `mlprof run` again at the job's exit
    # with the steps it ran after the profiler stopped. They place the host samples after the last window on
    # step numbers (analysis/growth.py).
    job_steps: Union[Int, None] = None
    last_step_end_ns: Union[Int, None] = None
    # Why collection stopped before its schedule ended, not as a failure (the job started its own profiler).
    stopped_early: Union[str, None] = None

    def __post_init__(self) -> None:
        if self.windows is None:  # older captures may write null
            self.windows = []


# -- profiler_metadata.json -----------------------------------------------------------------------
class CaptureMetadata(_Record, kw_only=True):
    user: dict[str, Any] = {}  # add_metadata (strings) and add_metadata_json (decoded JSON)
    environment: dict[str, Any] = {}  # performance-relevant variables that are set
    system: dict[str, Any] = {}
    # Per written window: {"window", "at_start": {setting: value}, "changed": {setting: [start, end]}}.
    torch_state: list[dict[str, Any]] = []


# -- raw/window_NNNN/window.json ------------------------------------------------------------------
class WindowInfo(_Record, kw_only=True):
    index: Union[Int, None] = None
    status: Union[str, None] = None
    level: Union[str, None] = None
    first_step: Union[Int, None] = None
    last_step: Union[Int, None] = None
    start_ns: Union[Int, None] = None
    end_ns: Union[Int, None] = None
    # File name by kind (layout.WINDOW_FILES keys); null: not written (kineto at Level_none).
    files: Union[dict[str, Union[str, None]], None] = None
    kineto_events_written: Union[bool, None] = None


# -- steps.json, markers.json, gc.json --------------------------------------------------------------
class StepRecord(_Record, kw_only=True):
    step: Int
    start_ns: Int
    end_ns: Int
    # CPU time of the whole process during the step, and the stepping thread's wait for a core
    # (run-queue delay, Linux); null where not measured (older captures, other platforms).
    cpu_ns: Union[Int, None] = None
    cpu_wait_ns: Union[Int, None] = None
    # The stepping thread's own time on a CPU during the step (schedstat, Linux): work it did, without
    # waits for a core, sleeps, I/O or (under KVM) time the hypervisor gave its core away.
    thread_cpu_ns: Union[Int, None] = None
    # CPU time of the host-speed probe run right after the step (collect/speed_probe.py); null: not run.
    speed_probe_ns: Union[Int, None] = None
    # The profiler stopped during the step (the job ended, or stop() came before the next step()): a piece
    # of a step, not a step. Absent (older captures): false.
    partial: bool = False


class MarkRecord(_Record, kw_only=True):
    name: str
    ts_ns: Int
    tid: Union[Int, None] = None


class RangeRecord(_Record, kw_only=True):
    id: Union[Int, None] = None
    name: str
    start_ns: Int
    end_ns: Union[Int, None] = None  # null: still open when the window closed
    tid: Union[Int, None] = None
    end_tid: Union[Int, None] = None
    stream: Union[Int, str, None] = None
    device_start_ns: Union[Int, None] = None
    device_end_ns: Union[Int, None] = None


class MarkersFile(_Record, kw_only=True):
    marks: list[MarkRecord] = []
    ranges: list[RangeRecord] = []


class GcRecord(_Record, kw_only=True):
    start_ns: Int
    dur_ns: Int
    generation: Union[Int, None] = None
    collected: Union[Int, None] = None
    uncollectable: Union[Int, None] = None
    tid: Union[Int, None] = None


# -- python_samples.json, modules.json ------------------------------------------------------------
class PythonSamplesFile(_Record, kw_only=True):
    interval_ns: Int = 0
    tid: Union[Int, None] = None
    frames: list[tuple[str, Int, str]] = []  # [file, line, function]
    stacks: list[list[Int]] = []  # frame indices, outermost first
    samples: list[tuple[Int, Int]] = []  # [ts_ns, stack index]
    dropped: Int = 0
    waited: Int = 0  # samples left out: the thread waited for a CPU core most of the interval before them
    method: Union[str, None] = None  # "signal" (the thread read its own stack) or "thread"; null: older captures


class ModulesFile(_Record, kw_only=True):
    # [path, type] (older captures) or [path, type, class_module, param_dtype, input_dtype]
    modules: list[list[Union[str, None]]] = []
    # [module, start_ns, end_ns, tid] or, for outermost calls, [..., input_shape]
    calls: list[list[Union[Int, None, list[Int]]]] = []
    dropped: Int = 0


# -- scalars/segment_NNNN.json --------------------------------------------------------------------
class ScalarsSegment(_Record, kw_only=True):
    # [name, step or null, ts_ns, value or null, source]
    rows: list[tuple[str, Union[Int, None], Int, Union[float, None], str]] = []
    dropped: Int = 0


# -- host_samples.json (and the sampler's host_samples.jsonl, one sample a line) ---------------------
# Only the groups the sampler was asked for (host_sys) are written: absent keys stay absent on disk.
class HostProcess(_Record, kw_only=True, omit_defaults=True):
    """A process of ``job_processes`` or ``top_processes``: its CPU use since the previous scan."""

    pid: Int
    name: Union[str, None] = None
    cpu_percent: Union[float, None] = None  # 100 = one core fully busy


class GpuSample(_Record, kw_only=True, omit_defaults=True):
    index: Int
    util_percent: Union[Int, None] = None
    mem_util_percent: Union[Int, None] = None
    mem_used_bytes: Union[Int, None] = None
    power_w: Union[float, None] = None
    sm_clock_mhz: Union[Int, None] = None


class HostSample(_Record, kw_only=True, omit_defaults=True):
    ts_ns: Int  # wall clock
    # "cpu": system and per core (100 = all cores busy), the job's process tree (100 = one core busy).
    cpu_percent: Union[float, None] = None
    cpu_percent_per_core: Union[list[float], None] = None
    job_cpu_percent: Union[float, None] = None
    # "cpu" too: who else wants the cores (runnable_threads: procs_running of /proc/stat, Linux only).
    cpu_count: Union[Int, None] = None
    runnable_threads: Union[Int, None] = None
    job_threads: Union[Int, None] = None
    job_processes: Union[list[HostProcess], None] = None
    top_processes: Union[list[HostProcess], None] = None
    # "mem"
    mem_used_bytes: Union[Int, None] = None
    mem_available_bytes: Union[Int, None] = None
    job_rss_bytes: Union[Int, None] = None
    # "disk", "network": rates since the previous sample
    disk_read_bytes_per_s: Union[float, None] = None
    disk_write_bytes_per_s: Union[float, None] = None
    net_recv_bytes_per_s: Union[float, None] = None
    net_sent_bytes_per_s: Union[float, None] = None
    gpus: Union[list[GpuSample], None] = None  # NVML, when a driver is present


# -- encoding and decoding ------------------------------------------------------------------------
def _enc_hook(obj: Any) -> Any:
    # Subclasses of JSON's types (torch's TorchVersion is a str) are written as their base type, as json.dumps does.
    for base in (str, int, float):
        if isinstance(obj, base):
            return base(obj)
    raise TypeError(f"cannot write a {type(obj).__name__} into a capture file")


_encoder = msgspec.json.Encoder(enc_hook=_enc_hook)


def encode(record: Any) -> bytes:
    """Compact JSON of a record (a struct, or lists/dicts of them)."""
    try:
        return _encoder.encode(record)
    except UnicodeEncodeError:
        # A lone surrogate (a file name with undecodable bytes, in a frame or a process name): written as
        # U+FFFD. An escaped surrogate ("\udce9", as json.dumps writes it) is JSON no strict reader takes
        # back, and would make the whole file unreadable.
        return _encoder.encode(_replace_surrogates(msgspec.to_builtins(record, enc_hook=_enc_hook)))


def _replace_surrogates(value: Any) -> Any:
    if isinstance(value, str):
        return "".join("\ufffd" if 0xD800 <= ord(c) <= 0xDFFF else c for c in value) if _has_surrogate(value) else value
    if isinstance(value, (list, tuple)):
        return [_replace_surrogates(v) for v in value]
    if isinstance(value, dict):
        return {_replace_surrogates(k): _replace_surrogates(v) for k, v in value.items()}
    return value


def _has_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


_JSON_TYPES = {"array": "list", "object": "dict"}
_EXPECTED = re.compile(r"^Expected `([^`]*)`, got `([^`]*)` - at `(\$.+)`$")
_LIMIT = re.compile(r"^Expected `([^`]*)` ([<>]=? ?-?\d+) - at `(\$.+)`$")


def _explain(exc: msgspec.ValidationError) -> str:
    """msgspec's message in the capture's words: ``rank must be int or null, not str (at $.rank)``."""
    text = str(exc)
    match = _EXPECTED.match(text)
    if match:
        field = match.group(3)[1:].lstrip(".")
        want = " or ".join(_JSON_TYPES.get(t, t) for t in match.group(1).split(" | "))
        return f"{field} must be {want}, not {_JSON_TYPES.get(match.group(2), match.group(2))} (at {match.group(3)})"
    match = _LIMIT.match(text)
    if match:
        field = match.group(3)[1:].lstrip(".")
        return f"{field} is out of range (must be {match.group(2)}; at {match.group(3)})"
    return text


def convert(path: Path, raw: object, kind: type[T]) -> T:
    """Already-decoded JSON as ``kind``; CaptureError naming ``path`` and the field otherwise."""
    try:
        return msgspec.convert(raw, kind)
    except msgspec.ValidationError as exc:
        raise CaptureError(f"{path}: invalid capture file: {_explain(exc)}") from None


def _read(path: Path) -> bytes:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise CaptureError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if not data.strip():
        raise CaptureError(f"{path}: empty file")
    return data


def decode_file(path: Path | None, kind: Any, default: Any = None) -> Any:
    """One capture file decoded into ``kind`` (``default`` when ``path`` is None).

    A bad file is a CaptureError of one line naming the file and the field.
    """
    if path is None:
        return default
    data = _read(path)
    try:
        return msgspec.json.decode(data, type=kind)
    except msgspec.ValidationError as exc:
        raise CaptureError(f"{path}: invalid capture file: {_explain(exc)}") from None
    except msgspec.DecodeError as exc:
        if "surrogate" in str(exc):
            # Written by an older mlprof: an undecodable file name escaped as a lone surrogate ("\udce9").
            return _decode_with_surrogates(path, data, kind)
        raise CaptureError(f"{path}: invalid capture file: {exc}") from None
    except (RecursionError, UnicodeDecodeError) as exc:
        why = "JSON nested too deep" if isinstance(exc, RecursionError) else "invalid UTF-8 text"
        raise CaptureError(f"{path}: invalid capture file: {why}") from None


def _decode_with_surrogates(path: Path, data: bytes, kind: Any) -> Any:
    try:
        value = _replace_surrogates(json.loads(data))
        return msgspec.convert(value, type=kind)
    except msgspec.ValidationError as exc:
        raise CaptureError(f"{path}: invalid capture file: {_explain(exc)}") from None
    except (ValueError, RecursionError) as exc:
        raise CaptureError(f"{path}: invalid capture file: {exc}") from None


def read_manifest(capture_dir: Path) -> tuple[Manifest, dict[str, Any]]:
    """A capture's ``profiler_info.json``: the typed manifest and the raw JSON object (for metadata).

    A missing file reads as an empty manifest; an unsupported schema version,
    a field of the wrong type or an integer beyond int64 is a CaptureError.
    """
    path = Path(capture_dir) / layout.INFO_FILE
    raw: object = {}
    if path.is_file():
        raw = decode_file(path, Any)
    if not isinstance(raw, dict):
        raise CaptureError(f"{path}: not a JSON object")
    # The version first: a later schema may change any other field.
    version = raw.get("schema_version", layout.SCHEMA_VERSION)
    if type(version) is not int or not 1 <= version <= layout.SCHEMA_VERSION:
        raise CaptureError(f"{path}: schema_version {version!r} is not supported "
                           f"(this mlprof reads 1 to {layout.SCHEMA_VERSION})")
    return convert(path, raw, Manifest), raw
