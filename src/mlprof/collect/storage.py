"""--storage-limit: keep the captures under a size by ageing out the oldest windows.

Only finished raw windows (``*_mlprof/raw/window_*``) are ever deleted, oldest
first by their end time, never the newest one and never anything that is not
mlprof's own capture data.
"""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

from ..capture import layout
from ..capture.records import WindowInfo, decode_file
from ..errors import CaptureError

__all__ = ["dir_size_bytes", "age_out", "AGE_OUT_AT", "AGE_OUT_TO"]

logger = logging.getLogger("mlprof")

AGE_OUT_AT = 0.9  # start deleting when the output reaches 90% of the limit ...
AGE_OUT_TO = 0.8  # ... and delete down to 80%, so it does not happen every window


def dir_size_bytes(path: Path) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                pass  # deleted meanwhile
    return total


def _windows_oldest_first(output: Path) -> list[tuple[int, Path]]:
    found = []
    for window in output.glob(f"*{layout.CAPTURE_DIR_SUFFIX}/{layout.RAW_DIR}/{layout.WINDOW_PREFIX}*"):
        if layout.window_index(window.name) is None or window.is_symlink():
            continue
        try:
            end_ns = decode_file(window / layout.WINDOW_FILE, WindowInfo).end_ns
        except CaptureError:
            end_ns = None
        try:
            found.append((end_ns if end_ns is not None else window.stat().st_mtime_ns, window))
        except OSError:
            continue  # deleted meanwhile
    return sorted(found)


def age_out(output: Path, limit_bytes: int, keep_newest: int = 1) -> list[Path]:
    """Delete the oldest windows under ``output`` (the results directory) once it nears ``limit_bytes``;
    returns what went."""
    total = dir_size_bytes(output)
    if total <= limit_bytes * AGE_OUT_AT:
        return []
    removed = []
    candidates = _windows_oldest_first(output)
    for _end_ns, window in candidates[: max(0, len(candidates) - keep_newest)]:
        if total <= limit_bytes * AGE_OUT_TO:
            break
        size = dir_size_bytes(window)
        shutil.rmtree(window, ignore_errors=True)
        total -= size
        removed.append(window)
        logger.warning("mlprof: storage limit %d MB: aged out %s (%d MB)", limit_bytes >> 20, window, size >> 20)
    return removed
