"""Names and constants of the raw capture directory (docs/capture_format.md).

Both the writer (``mlprof.collect``) and the readers (``mlprof.parse``) import
these, so the format is spelled in exactly one place.
"""

from __future__ import annotations

import re

SCHEMA_VERSION = 1

CAPTURE_DIR_SUFFIX = "_mlprof"
INFO_FILE = "profiler_info.json"
METADATA_FILE = "profiler_metadata.json"
RAW_DIR = "raw"
OUTPUT_DIR = "mlprof_output"
LOG_DIR = "logs"

WINDOW_PREFIX = "window_"
PARTIAL_PREFIX = ".partial_"

# Files inside one window directory.
WINDOW_FILE = "window.json"
KINETO_TRACE_FILE = "kineto.pt.trace.json"
STEPS_FILE = "steps.json"
MARKERS_FILE = "markers.json"
GC_FILE = "gc.json"
PYTHON_SAMPLES_FILE = "python_samples.json"
MODULES_FILE = "modules.json"

# mlprof's own JSON files of a window by kind: the window.json "files" keys
# (typed in capture/records.py), and every file a window may hold.
WINDOW_JSON_FILES = {
    "steps": STEPS_FILE,
    "markers": MARKERS_FILE,
    "gc": GC_FILE,
    "python_samples": PYTHON_SAMPLES_FILE,
    "modules": MODULES_FILE,
}
WINDOW_FILES = {"kineto": KINETO_TRACE_FILE, **WINDOW_JSON_FILES}

# Files in the capture directory.
HOST_SAMPLES_FILE = "host_samples.json"
HOST_SAMPLES_PARTIAL_FILE = "host_samples.jsonl"  # while sampling; left behind by a killed job
# Training scalars (mlprof.log_scalar, the trainer integrations): capture-level
# segments, each written once, atomically, in order (scalars/segment_0000.json, ...).
SCALARS_DIR = "scalars"

DIR_MODE = 0o750
FILE_MODE = 0o640

STATUS_RUNNING = "running"
STATUS_COMPLETE = "complete"
STATUS_FINISHED = "finished"
STATUS_FAILED = "failed"

_WINDOW_RE = re.compile(r"^window_(\d{4,})$")
_SEGMENT_RE = re.compile(r"^segment_(\d{4,})\.json$")


def window_dir_name(window_index: int) -> str:
    return f"{WINDOW_PREFIX}{window_index:04d}"


def window_rel_dir(window_index: int) -> str:
    """A finished window's directory relative to the capture directory, as the manifest lists it."""
    return f"{RAW_DIR}/{window_dir_name(window_index)}"


def capture_dir_name(worker_name: str, stamp: str, suffix: int = 0) -> str:
    """``{worker_name}_{stamp}_mlprof``; ``-N`` after the stamp for a second capture in the same millisecond."""
    return f"{worker_name}_{stamp}{f'-{suffix}' if suffix else ''}{CAPTURE_DIR_SUFFIX}"


def partial_dir_name(window_index: int) -> str:
    return f"{PARTIAL_PREFIX}{window_dir_name(window_index)}"


def window_index(dir_name: str) -> int | None:
    """The window number of a finished window directory name, else None."""
    match = _WINDOW_RE.match(dir_name)
    return int(match.group(1)) if match else None


def scalars_segment_name(index: int) -> str:
    return f"segment_{index:04d}.json"


def scalars_segment_index(file_name: str) -> int | None:
    """The number of a finished scalars segment file name, else None (temporary files included)."""
    match = _SEGMENT_RE.match(file_name)
    return int(match.group(1)) if match else None
