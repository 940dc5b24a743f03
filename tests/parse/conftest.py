"""Helpers for parser tests: inline Kineto traces, hand-built captures, parsed stores."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from mlprof.parse import ParseOptions, parse_path
from mlprof.tables.store import TableStore
from trace_events import BASE_NS


def write_trace(path: Path, events: list[dict], base_ns: int | None = BASE_NS, **top) -> Path:
    doc = {"schemaVersion": 1, **top, "traceEvents": events}
    if base_ns is not None:
        doc["baseTimeNanoseconds"] = base_ns
    data = json.dumps(doc).encode()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress(data) if path.name.endswith(".gz") else data)
    return path


def parse_one(path: Path, out: Path) -> tuple[TableStore, object]:
    result = parse_path(path, ParseOptions(output_dir=out))[0]
    return TableStore(result.tables_dir), result


def make_capture(root: Path, windows: dict[int, dict], status: str = "finished",
                 partial: list[int] = (), listed: list[int] | None = None, config: dict | None = None) -> Path:
    """A raw capture per docs/capture_format.md.

    ``windows`` maps an index to {"events": [...] or None, "steps": [...],
    "markers": {...}, "gc": [...]}; ``partial`` adds .partial_window_NNNN dirs;
    ``listed`` is which windows profiler_info.json lists (default: all).
    """
    root.mkdir(parents=True)
    listed = sorted(windows) if listed is None else listed
    info = {"schema_version": 1, "kind": "mlprof.capture", "status": status, "worker_name": "host_1",
            "host": "host", "pid": 1, "rank": 3, "world_size": 8, "local_rank": 3,
            "versions": {"mlprof": "0.1.0"}, "config": config or {}, "clock": {"wall_ns": 0, "monotonic_ns": 0},
            "created_wall_ns": BASE_NS,
            "windows": [{"index": i, "dir": f"raw/window_{i:04d}", "status": "complete"} for i in listed],
            "error": None}
    (root / "profiler_info.json").write_text(json.dumps(info))
    (root / "profiler_metadata.json").write_text(json.dumps(
        {"user": {"k": "v"}, "environment": {"OMP_NUM_THREADS": "2"}, "system": {"cpu_count": 2}}))
    for index, spec in windows.items():
        wdir = root / "raw" / f"window_{index:04d}"
        wdir.mkdir(parents=True)
        files = {}
        if spec.get("events") is not None:
            write_trace(wdir / "kineto.pt.trace.json", spec["events"])
            files["kineto"] = "kineto.pt.trace.json"
        for key in ("steps", "markers", "gc", "python_samples", "modules"):
            if key in spec:
                (wdir / f"{key}.json").write_text(json.dumps(spec[key]))
                files[key] = f"{key}.json"
        (wdir / "window.json").write_text(json.dumps(
            {"index": index, "status": "complete", "level": "Level0", "files": files}))
    for index in partial:
        pdir = root / "raw" / f".partial_window_{index:04d}"
        pdir.mkdir(parents=True)
        (pdir / "kineto.pt.trace.json").write_text('{"traceEvents": [')
    return root

