"""A hand-built capture holding only mlprof's steps.json: one window, CPU-only, for compare's verdict tests."""

from __future__ import annotations

import json
from pathlib import Path

from trace_events import BASE_NS

T0 = BASE_NS


def write_steps_capture(root: Path, steps: list[dict]) -> None:
    """``root`` becomes a finished capture whose one window holds ``steps`` (steps.json records)."""
    window = root / "raw" / "window_0000"
    window.mkdir(parents=True)
    (window / "steps.json").write_text(json.dumps(steps))
    (window / "window.json").write_text(json.dumps({"index": 0, "status": "complete", "files": {"steps": "steps.json"}}))
    (root / "profiler_info.json").write_text(json.dumps({
        "schema_version": 1, "kind": "mlprof.capture", "status": "finished", "rank": 0, "world_size": 1,
        "windows": [{"index": 0, "dir": "raw/window_0000", "status": "complete"}], "created_wall_ns": T0}))
    (root / "profiler_metadata.json").write_text(json.dumps(
        {"user": {}, "environment": {}, "system": {"cpu_count": 2, "torch_num_threads": 1}}))
