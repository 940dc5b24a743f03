"""Finds what there is to parse under a path: captures, their windows, trace files.

A capture's ``profiler_info.json`` may lag behind its windows (a kill between a
window's rename and the manifest rewrite), so each window's own
``window.json`` is the authority. ``.partial_*`` windows are skipped and
reported, never parsed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from mlprof.capture import layout
from mlprof.errors import CaptureError
from mlprof.parse.ascend_common import AscendInput, ascend_root_of, is_ascend_dir, read_ascend_dir

__all__ = ["WindowFiles", "CaptureInput", "TraceInput", "find_inputs", "read_capture", "is_trace_file"]

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

    @property
    def output_dir(self) -> Path:
        return self.root / layout.OUTPUT_DIR


@dataclass
class TraceInput:
    path: Path

    @property
    def output_dir(self) -> Path:
        return self.path.parent / (_trace_stem(self.path.name) + "_mlprof_output")


def _trace_stem(name: str) -> str:
    for suffix in (".pt.trace.json.gz", ".pt.trace.json", ".json.gz", ".json", ".gz"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def is_trace_file(path: Path) -> bool:
    return path.is_file() and (path.name.endswith(".pt.trace.json") or path.name.endswith(".pt.trace.json.gz"))


def is_capture_dir(path: Path) -> bool:
    return path.is_dir() and ((path / layout.INFO_FILE).is_file() or (path / layout.RAW_DIR).is_dir())


def _load_json(path: Path, default):
    if not path.is_file():
        return default
    try:
        return json.loads(path.read_bytes())
    except (OSError, ValueError) as exc:
        raise CaptureError(f"{path}: unreadable JSON ({exc})") from None


def read_capture(root: Path) -> CaptureInput:
    """The capture at ``root`` with every complete window, sorted by index."""
    root = Path(root)
    manifest = _load_json(root / layout.INFO_FILE, {})
    if not isinstance(manifest, dict):
        raise CaptureError(f"{root / layout.INFO_FILE}: not a JSON object")
    metadata = _load_json(root / layout.METADATA_FILE, {})
    capture = CaptureInput(root=root, manifest=manifest, metadata=metadata if isinstance(metadata, dict) else {})
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
        files = info.get("files") or {}

        def _file(key: str, default: str) -> Path | None:
            name = files.get(key, default)
            # Names come from the capture: only plain file names inside the window.
            if not isinstance(name, str) or "/" in name or name in ("", ".", ".."):
                return None
            candidate = entry / name
            return candidate if candidate.is_file() and not candidate.is_symlink() else None

        capture.windows.append(WindowFiles(
            index=index, path=entry,
            kineto=_file("kineto", layout.KINETO_TRACE_FILE),
            steps=_file("steps", layout.STEPS_FILE),
            markers=_file("markers", layout.MARKERS_FILE),
            gc=_file("gc", layout.GC_FILE),
            manifest=info,
            python_samples=_file("python_samples", layout.PYTHON_SAMPLES_FILE),
            modules=_file("modules", layout.MODULES_FILE),
        ))
    return capture


def find_inputs(path: Path) -> list[CaptureInput | TraceInput | AscendInput]:
    """Captures, trace files and torch_npu ``*_ascend_pt`` folders under ``path``
    (one of them, or a dir of them)."""
    path = Path(path)
    if not path.exists():
        raise CaptureError(f"{path}: no such file or directory")
    ascend_root = ascend_root_of(path)  # a torch_npu rank folder, its output dir or one of its files
    if ascend_root is not None:
        return [read_ascend_dir(ascend_root)]
    if path.is_file():
        return [TraceInput(path)]
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
    if not found:
        raise CaptureError(f"{path}: no mlprof capture, *_ascend_pt folder or *.pt.trace.json(.gz) file found")
    return found
