"""Parser of mlprof's own window files: steps.json, markers.json, gc.json, python_samples.json,
modules.json, and the capture's scalars segments.

The records are defined once, in :mod:`mlprof.capture.records` (the writer
encodes the same structs); times there are already wall-clock ns.
"""

from __future__ import annotations

from pathlib import Path

from mlprof.capture.records import (GcRecord, MarkersFile, MarkRecord, ModulesFile, PythonSamplesFile,
                                    RangeRecord, ScalarsSegment, StepRecord, decode_file)

__all__ = ["StepRecord", "MarkRecord", "RangeRecord", "MarkersFile", "GcRecord", "PythonSamplesFile",
           "ModulesFile", "ScalarsSegment", "read_steps", "read_markers", "read_gc", "read_python_samples",
           "read_modules", "read_scalars_segment"]


def read_steps(path: Path | None) -> list[StepRecord]:
    return decode_file(path, list[StepRecord], [])


def read_markers(path: Path | None) -> MarkersFile:
    return decode_file(path, MarkersFile, MarkersFile())


def read_gc(path: Path | None) -> list[GcRecord]:
    return decode_file(path, list[GcRecord], [])


def read_python_samples(path: Path | None) -> PythonSamplesFile | None:
    return decode_file(path, PythonSamplesFile, None)


def read_modules(path: Path | None) -> ModulesFile | None:
    return decode_file(path, ModulesFile, None)


def read_scalars_segment(path: Path) -> ScalarsSegment:
    return decode_file(path, ScalarsSegment, ScalarsSegment())
