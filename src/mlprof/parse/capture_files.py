"""Parser of mlprof's own window files: steps.json, markers.json, gc.json.

The format is docs/capture_format.md; times there are already wall-clock ns.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Union

import msgspec

from mlprof.errors import CaptureError

__all__ = ["StepRecord", "MarkRecord", "RangeRecord", "MarkersFile", "GcRecord", "PythonSamplesFile",
           "ModulesFile", "ScalarsSegment", "read_steps", "read_markers", "read_gc", "read_python_samples",
           "read_modules", "read_scalars_segment"]


# Every integer must fit the tables' int64 columns (hostile or corrupt files).
Int = Annotated[int, msgspec.Meta(ge=-(2**62), le=2**62)]


class StepRecord(msgspec.Struct):
    step: Int
    start_ns: Int
    end_ns: Int


class MarkRecord(msgspec.Struct):
    name: str
    ts_ns: Int
    tid: Union[Int, None] = None


class RangeRecord(msgspec.Struct):
    name: str
    start_ns: Int
    id: Union[Int, None] = None
    end_ns: Union[Int, None] = None
    tid: Union[Int, None] = None
    end_tid: Union[Int, None] = None
    stream: Union[Int, str, None] = None
    device_start_ns: Union[Int, None] = None
    device_end_ns: Union[Int, None] = None


class MarkersFile(msgspec.Struct):
    marks: list[MarkRecord] = []
    ranges: list[RangeRecord] = []


class GcRecord(msgspec.Struct):
    start_ns: Int
    dur_ns: Int
    generation: Union[Int, None] = None
    collected: Union[Int, None] = None
    uncollectable: Union[Int, None] = None
    tid: Union[Int, None] = None


class PythonSamplesFile(msgspec.Struct):
    interval_ns: Int = 0
    tid: Union[Int, None] = None
    frames: list[tuple[str, Int, str]] = []
    stacks: list[list[Int]] = []
    samples: list[tuple[Int, Int]] = []
    dropped: Int = 0


class ModulesFile(msgspec.Struct):
    # [path, type] (older captures) or [path, type, class_module, param_dtype, input_dtype]
    modules: list[list[Union[str, None]]] = []
    # [module, start_ns, end_ns, tid] or, for outermost calls, [..., input_shape]
    calls: list[list[Union[Int, None, list[Int]]]] = []
    dropped: Int = 0


class ScalarsSegment(msgspec.Struct):
    # [name, step or null, ts_ns, value or null, source] (docs/capture_format.md)
    rows: list[tuple[str, Union[Int, None], Int, Union[float, None], str]] = []
    dropped: Int = 0


def _decode(path: Path | None, kind, default):
    if path is None:
        return default
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise CaptureError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if not data.strip():
        raise CaptureError(f"{path}: empty file")
    try:
        return msgspec.json.decode(data, type=kind)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise CaptureError(f"{path}: invalid capture file: {exc}") from None
    except (RecursionError, UnicodeDecodeError) as exc:
        why = "JSON nested too deep" if isinstance(exc, RecursionError) else "invalid UTF-8 text"
        raise CaptureError(f"{path}: invalid capture file: {why}") from None


def read_steps(path: Path | None) -> list[StepRecord]:
    return _decode(path, list[StepRecord], [])


def read_markers(path: Path | None) -> MarkersFile:
    return _decode(path, MarkersFile, MarkersFile())


def read_gc(path: Path | None) -> list[GcRecord]:
    return _decode(path, list[GcRecord], [])


def read_python_samples(path: Path | None) -> PythonSamplesFile | None:
    return _decode(path, PythonSamplesFile, None)


def read_modules(path: Path | None) -> ModulesFile | None:
    return _decode(path, ModulesFile, None)


def read_scalars_segment(path: Path) -> ScalarsSegment:
    return _decode(path, ScalarsSegment, ScalarsSegment())
