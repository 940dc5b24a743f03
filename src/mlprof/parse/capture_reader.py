"""Finds what there is to parse under a path: captures, their windows, trace files.

A capture's ``profiler_info.json`` may lag behind its windows (a kill between a
window's rename and the manifest rewrite), so each window's own
``window.json`` is the authority. ``.partial_*`` windows are skipped and
reported, never parsed.
"""

from __future__ import annotations

import os
import stat
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import msgspec

from mlprof.capture import layout
from mlprof.capture.records import CaptureMetadata, WindowInfo, decode_file, read_manifest
from mlprof.tables.layout import trace_output_dir
from mlprof.errors import CaptureError
from mlprof.parse.ascend_common import AscendInput, ascend_root_of, is_ascend_dir, read_ascend_dir

__all__ = ["WindowFiles", "CaptureInput", "TraceInput", "find_inputs", "unreadable", "read_capture", "is_trace_file"]

TRACE_SUFFIXES = (".pt.trace.json", ".pt.trace.json.gz", ".json", ".json.gz")


@dataclass(frozen=True)
class WindowFiles:
    window_index: int
    path: Path
    kineto: Path | None
    steps: Path | None
    markers: Path | None
    gc: Path | None
    manifest: WindowInfo  # the window's own window.json
    python_samples: Path | None = None
    modules: Path | None = None


@dataclass
class CaptureInput:
    capture_dir: Path
    manifest: dict  # profiler_info.json as written (every key it has, for the metadata table)
    metadata: dict  # profiler_metadata.json (the typed CaptureMetadata, as plain JSON values)
    windows: list[WindowFiles] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # "path: why" for each window not parsed
    scalar_segments: list[Path] = field(default_factory=list)  # scalars/segment_NNNN.json, in order

    @property
    def path(self) -> Path:
        """The input's path, as every input kind spells it (mlprof.outputs, the batch runner)."""
        return self.capture_dir

    @property
    def output_dir(self) -> Path:
        return self.capture_dir / layout.OUTPUT_DIR


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


def read_capture(capture_dir: Path) -> CaptureInput:
    """The capture at ``capture_dir`` with every complete window, sorted by index."""
    capture_dir = Path(capture_dir)
    _typed, manifest = read_manifest(capture_dir)  # the typed read refuses wrongly typed fields
    metadata_path = capture_dir / layout.METADATA_FILE
    metadata = msgspec.to_builtins(decode_file(metadata_path, CaptureMetadata)) if metadata_path.is_file() else {}
    capture = CaptureInput(capture_dir=capture_dir, manifest=manifest, metadata=metadata)
    capture.scalar_segments = _scalar_segments(capture_dir / layout.SCALARS_DIR, capture.skipped)
    raw = capture_dir / layout.RAW_DIR
    if raw.is_symlink():  # mlprof never makes one: windows read through it would come from anywhere
        capture.skipped.append(f"{raw}: a symlink; refusing to read it")
        return capture
    if not raw.is_dir():
        return capture
    for entry in sorted(raw.iterdir()):
        if entry.name.startswith(layout.PARTIAL_PREFIX):
            capture.skipped.append(f"{entry}: partial window (being written or interrupted)")
            continue
        window_index = layout.window_index(entry.name)
        if window_index is None:
            continue
        if entry.is_symlink():
            capture.skipped.append(f"{entry}: a symlink; refusing to read it as a window")
            continue
        if not entry.is_dir():
            continue
        window_json = entry / layout.WINDOW_FILE
        try:
            window = decode_file(window_json, WindowInfo) if window_json.is_file() else None
        except CaptureError as exc:
            capture.skipped.append(str(exc))
            continue
        if window is None or window.status != layout.STATUS_COMPLETE:
            capture.skipped.append(f"{entry}: no complete {layout.WINDOW_FILE}")
            continue
        files = window.files or {}
        try:
            found = {key: _window_file(entry, files, key, default) for key, default in layout.WINDOW_FILES.items()}
        except CaptureError as exc:
            # A complete window whose listed file is missing or hostile: skipped
            # and reported, never parsed as an empty window.
            capture.skipped.append(str(exc))
            continue
        capture.windows.append(WindowFiles(window_index=window_index, path=entry, manifest=window, **found))
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
    try:
        return _find_inputs(Path(path))
    except PermissionError as exc:  # a folder on the way that this user cannot list or enter
        raise unreadable(exc, path) from None


def unreadable(exc: OSError, path: Path | str) -> CaptureError:
    """The one line of an input mlprof may not read (exit 3, as a missing one)."""
    where = Path(exc.filename or path)
    try:
        os.lstat(where)
    except PermissionError:  # it could not even be looked at: its folder is the one closed
        where = where.parent
    except OSError:
        pass
    return CaptureError(f"{where}: cannot read: {exc.strerror or exc}")


def _find_inputs(path: Path) -> list[CaptureInput | TraceInput | AscendInput]:
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
        # torch_npu jobs are often kept as <job>/<export>/<level>/rank{N}_ascend_pt (text/level1/rank0_ascend_pt).
        found = [read_ascend_dir(d) for d in _ascend_dirs_below(path, ASCEND_SEARCH_DEPTH)]
    if not found:
        raise CaptureError(f"{path}: no mlprof capture, *_ascend_pt folder or Kineto trace file (plain or gzip "
                           "JSON) found")
    return found


# How many folders down a torch_npu rank folder is looked for when none is one level down: three is the
# <job>/text/level1/rank0_ascend_pt layout; one more leaves room for a folder per job around it.
ASCEND_SEARCH_DEPTH = 4


def _ascend_dirs_below(path: Path, depth: int) -> list[Path]:
    """The torch_npu rank folders under ``path``, at most ``depth`` folders down, by path; symlinks not followed."""
    if depth <= 0:
        return []
    found: list[Path] = []
    try:
        children = sorted(path.iterdir())
    except OSError:  # a folder below that this user cannot list holds nothing we could read
        return []
    for child in children:
        if child.is_symlink() or not child.is_dir():
            continue
        if is_ascend_dir(child):
            found.append(child)
        elif child.name != layout.OUTPUT_DIR:
            found += _ascend_dirs_below(child, depth - 1)
    return found
