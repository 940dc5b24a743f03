"""Finds what there is to parse under a path: captures, their windows, trace files.

A capture's ``profiler_info.json`` may lag behind its windows (a kill between a
window's rename and the manifest rewrite), so each window's own
``window.json`` is the authority. ``.partial_*`` windows are skipped and
reported, never parsed.
"""

from __future__ import annotations

import json
import os
import stat
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from mlprof.capture import layout
from mlprof.tables.layout import trace_output_dir
from mlprof.errors import CaptureError
from mlprof.parse.ascend_common import AscendInput, ascend_root_of, is_ascend_dir, read_ascend_dir

__all__ = ["WindowFiles", "CaptureInput", "TraceInput", "find_inputs", "read_capture", "is_trace_file",
           "validate_manifest"]

TRACE_SUFFIXES = (".pt.trace.json", ".pt.trace.json.gz", ".json", ".json.gz")


@dataclass(frozen=True)
class WindowFiles:
    index: int
    path: Path
    kineto: Path | None
    steps: Path | None
    markers: Path | None
    gc: Path | None
    manifest: dict
    python_samples: Path | None = None
    modules: Path | None = None


@dataclass
class CaptureInput:
    root: Path
    manifest: dict
    metadata: dict
    windows: list[WindowFiles] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # "path: why" for each window not parsed
    scalar_segments: list[Path] = field(default_factory=list)  # scalars/segment_NNNN.json, in order

    @property
    def output_dir(self) -> Path:
        return self.root / layout.OUTPUT_DIR


@dataclass
class TraceInput:
    path: Path

    @property
    def output_dir(self) -> Path:
        return trace_output_dir(self.path)


_SNIFF_BYTES = 1 << 16


def is_trace_file(path: Path) -> bool:
    """A Kineto/Chrome trace: named ``*.pt.trace.json(.gz)`` (then a broken one is
    still reported, not skipped), or, whatever its name, a regular file (plain or
    gzip) whose first 64 KiB start a JSON object with ``traceEvents`` (Kineto
    writes it after deviceProperties) or a JSON array of events."""
    try:
        if path.is_symlink() or not path.is_file():
            return False
        if path.name.endswith((".pt.trace.json", ".pt.trace.json.gz")):
            return True
        with open(path, "rb") as fh:
            head = fh.read(_SNIFF_BYTES)
    except OSError:
        return False
    if head[:2] == b"\x1f\x8b":
        try:
            head = zlib.decompressobj(wbits=31).decompress(head, _SNIFF_BYTES)
        except zlib.error:
            return False
    head = head.lstrip()
    if head[:1] == b"{":
        return b'"traceEvents"' in head
    return head[:1] == b"[" and head[1:].lstrip()[:1] in (b"{", b"]") and b'"ph"' in head


def is_capture_dir(path: Path) -> bool:
    return path.is_dir() and ((path / layout.INFO_FILE).is_file() or (path / layout.RAW_DIR).is_dir())


def _load_json(path: Path, default):
    if not path.is_file():
        return default
    try:
        return json.loads(path.read_bytes())
    except (OSError, ValueError, RecursionError) as exc:
        why = "nested too deep" if isinstance(exc, RecursionError) else exc
        raise CaptureError(f"{path}: unreadable JSON ({why})") from None


# Manifest keys and the JSON types they must have when present (None: null allowed).
_MANIFEST_TYPES: dict[str, tuple] = {
    "schema_version": (int,), "kind": (str,), "status": (str,), "worker_name": (str, type(None)),
    "host": (str, type(None)), "pid": (int, type(None)), "rank": (int, type(None)),
    "world_size": (int, type(None)), "local_rank": (int, type(None)), "versions": (dict, type(None)),
    "config": (dict, type(None)), "clock": (dict, type(None)), "created_wall_ns": (int, type(None)),
    "windows": (list, type(None)), "error": (str, type(None)),
}
_MANIFEST_INT_LIMIT = 2**62


def validate_manifest(path: Path, manifest: object) -> dict:
    """``profiler_info.json`` checked against docs/capture_format.md: a JSON object of the
    supported schema version, each known key of its type; CaptureError (exit 3) otherwise."""
    if not isinstance(manifest, dict):
        raise CaptureError(f"{path}: not a JSON object")
    version = manifest.get("schema_version", layout.SCHEMA_VERSION)
    if type(version) is not int or not 1 <= version <= layout.SCHEMA_VERSION:
        raise CaptureError(f"{path}: schema_version {version!r} is not supported "
                           f"(this mlprof reads 1 to {layout.SCHEMA_VERSION})")
    for key, types in _MANIFEST_TYPES.items():
        value = manifest.get(key)
        if key in manifest and (not isinstance(value, types) or isinstance(value, bool)):
            raise CaptureError(f"{path}: {key} must be {' or '.join(t.__name__ for t in types)}, "
                               f"not {type(value).__name__}")
        if type(value) is int and not -_MANIFEST_INT_LIMIT <= value <= _MANIFEST_INT_LIMIT:
            raise CaptureError(f"{path}: {key} {value} is out of range")
    return manifest


def read_capture(root: Path) -> CaptureInput:
    """The capture at ``root`` with every complete window, sorted by index."""
    root = Path(root)
    manifest = validate_manifest(root / layout.INFO_FILE, _load_json(root / layout.INFO_FILE, {}))
    metadata = _load_json(root / layout.METADATA_FILE, {})
    capture = CaptureInput(root=root, manifest=manifest, metadata=metadata if isinstance(metadata, dict) else {})
    capture.scalar_segments = _scalar_segments(root / layout.SCALARS_DIR, capture.skipped)
    raw = root / layout.RAW_DIR
    if not raw.is_dir():
        return capture
    for entry in sorted(raw.iterdir()):
        if entry.name.startswith(layout.PARTIAL_PREFIX):
            capture.skipped.append(f"{entry}: partial window (being written or interrupted)")
            continue
        index = layout.window_index(entry.name)
        if index is None or not entry.is_dir():
            continue
        window_json = entry / layout.WINDOW_FILE
        try:
            info = _load_json(window_json, None)
        except CaptureError as exc:
            capture.skipped.append(str(exc))
            continue
        if not isinstance(info, dict) or info.get("status") != layout.STATUS_COMPLETE:
            capture.skipped.append(f"{entry}: no complete {layout.WINDOW_FILE}")
            continue
        files = info.get("files")
        if files is None:
            files = {}
        try:
            if not isinstance(files, dict):
                raise CaptureError(f"{window_json}: files must be an object")
            found = {key: _window_file(entry, files, key, default) for key, default in _WINDOW_FILES.items()}
        except CaptureError as exc:
            # A complete window whose listed file is missing or hostile: skipped
            # and reported, never parsed as an empty window.
            capture.skipped.append(str(exc))
            continue
        capture.windows.append(WindowFiles(index=index, path=entry, manifest=info, **found))
    return capture


def _scalar_segments(folder: Path, skipped: list[str]) -> list[Path]:
    """Finished segments, by number; temporary files are ignored, symlinks and the like reported."""
    if folder.is_symlink() or not folder.is_dir():
        return []
    found = []
    for entry in folder.iterdir():
        index = layout.scalars_segment_index(entry.name)
        if index is None:
            continue
        if entry.is_symlink() or not entry.is_file():
            skipped.append(f"{entry}: not a regular file; refusing to read it")
            continue
        found.append((index, entry))
    return [path for _, path in sorted(found)]


_WINDOW_FILES = {"kineto": layout.KINETO_TRACE_FILE, "steps": layout.STEPS_FILE,
                 "markers": layout.MARKERS_FILE, "gc": layout.GC_FILE,
                 "python_samples": layout.PYTHON_SAMPLES_FILE, "modules": layout.MODULES_FILE}


def _window_file(window: Path, files: dict, key: str, default: str) -> Path | None:
    """A window's file: one window.json lists must be a plain file inside the window."""
    listed = key in files
    name = files.get(key, default)
    if name is None and listed:
        return None
    # Names come from the capture: only plain file names inside the window.
    if not isinstance(name, str) or "/" in name or "\\" in name or name in ("", ".", ".."):
        raise CaptureError(f"{window / layout.WINDOW_FILE}: files.{key} {str(name)[:80]!r} is not a file name "
                           "inside the window")
    candidate = window / name
    try:
        st = os.lstat(candidate)
    except FileNotFoundError:
        if listed:
            raise CaptureError(f"{candidate}: listed in {layout.WINDOW_FILE} but missing") from None
        return None
    except OSError as exc:
        raise CaptureError(f"{candidate}: cannot read: {exc.strerror or exc}") from None
    if not stat.S_ISREG(st.st_mode):
        kind = "a symlink" if stat.S_ISLNK(st.st_mode) else "not a regular file (FIFO, device or directory)"
        raise CaptureError(f"{candidate}: {kind}; refusing to read it")
    return candidate


def find_inputs(path: Path) -> list[CaptureInput | TraceInput | AscendInput]:
    """Captures, trace files and torch_npu ``*_ascend_pt`` folders under ``path``
    (one of them, or a dir of them; captures also one folder down, as in ``rank_{id}/``)."""
    path = Path(path)
    if not path.exists():
        raise CaptureError(f"{path}: no such file or directory")
    ascend_root = ascend_root_of(path)  # a torch_npu rank folder, its output dir or one of its files
    if ascend_root is not None:
        return [read_ascend_dir(ascend_root)]
    if path.is_file():
        return [TraceInput(path)]
    if not path.is_dir():
        raise CaptureError(f"{path}: not a regular file or directory (FIFO, socket or device); refusing to read it")
    if is_capture_dir(path):
        return [read_capture(path)]
    found: list[CaptureInput | TraceInput | AscendInput] = []
    for child in sorted(path.iterdir()):
        if child.is_symlink():
            continue
        if is_capture_dir(child):
            found.append(read_capture(child))
        elif is_trace_file(child):
            found.append(TraceInput(child))
        elif is_ascend_dir(child):
            found.append(read_ascend_dir(child))
        elif child.is_dir():
            # A folder per rank holding captures (seed 003's output/profile/rank_{id}/ layout).
            found += [read_capture(c) for c in sorted(child.iterdir()) if not c.is_symlink() and is_capture_dir(c)]
    if not found:
        raise CaptureError(f"{path}: no mlprof capture, *_ascend_pt folder or Kineto trace file (plain or gzip "
                           "JSON) found")
    return found
