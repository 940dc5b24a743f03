"""Writes the raw capture directory (docs/capture_format.md).

Every file goes to a temporary name and is renamed into place; each window is
written in a ``.partial_`` directory renamed when complete. So a job killed at
any point leaves only whole files and finished windows behind.
"""

from __future__ import annotations

import os
import socket
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from .._version import __version__
from ..capture import layout
from ..capture.files import make_private_dir, write_json_atomic
from .environment import performance_environment, rank_info, system_info

__all__ = ["CaptureWriter", "default_worker_name"]


def default_worker_name() -> str:
    return f"{socket.gethostname()}_{os.getpid()}"


class CaptureWriter:
    """One capture directory for one profiling session."""

    def __init__(self, root: Path, worker_name: str, config: dict[str, Any]) -> None:
        stamp = datetime.now().strftime("%Y%m%d%H%M%S%f")[:-3]
        make_private_dir(root)
        self.path = root / f"{worker_name}_{stamp}{layout.CAPTURE_DIR_SUFFIX}"
        suffix = 1
        while self.path.exists():  # two sessions in the same millisecond
            self.path = root / f"{worker_name}_{stamp}-{suffix}{layout.CAPTURE_DIR_SUFFIX}"
            suffix += 1
        make_private_dir(self.path)
        make_private_dir(self.path / layout.RAW_DIR)
        torch = sys.modules.get("torch")
        self.info: dict[str, Any] = {
            "schema_version": layout.SCHEMA_VERSION,
            "kind": "mlprof.capture",
            "status": layout.STATUS_RUNNING,
            "worker_name": worker_name,
            "host": socket.gethostname(),
            "pid": os.getpid(),
            **rank_info(),
            "versions": {
                "mlprof": __version__,
                "torch": getattr(torch, "__version__", None),
                "python": sys.version.split()[0],
            },
            "config": config,
            "clock": {"wall_ns": time.time_ns(), "monotonic_ns": time.monotonic_ns()},
            "created_wall_ns": time.time_ns(),
            "windows": [],
            "error": None,
        }
        self.user_metadata: dict[str, Any] = {}
        self.write_manifest()
        self.write_metadata()

    def write_manifest(self) -> None:
        write_json_atomic(self.path / layout.INFO_FILE, self.info)

    def write_metadata(self) -> None:
        write_json_atomic(
            self.path / layout.METADATA_FILE,
            {"user": self.user_metadata, "environment": performance_environment(), "system": system_info()},
        )

    def begin_window(self, index: int) -> Path:
        partial = self.path / layout.RAW_DIR / layout.partial_dir_name(index)
        return make_private_dir(partial)

    def finish_window(self, index: int, partial: Path, window: dict[str, Any]) -> Path:
        for child in partial.iterdir():
            os.chmod(child, layout.FILE_MODE)
        window = {"index": index, "status": layout.STATUS_COMPLETE, **window}
        write_json_atomic(partial / layout.WINDOW_FILE, window)
        final = self.path / layout.RAW_DIR / layout.window_dir_name(index)
        os.replace(partial, final)
        rel = f"{layout.RAW_DIR}/{final.name}"
        self.info["windows"].append(
            {"dir": rel, **{k: window.get(k) for k in ("index", "status", "first_step", "last_step", "start_ns", "end_ns")}}
        )
        # Refresh the rank: torch.distributed may have been initialised after start().
        self.info.update(rank_info())
        self.write_manifest()
        self.write_metadata()
        return final

    def close(self, status: str, error: str | None = None) -> None:
        self.info["status"] = status
        self.info["error"] = error
        self.write_manifest()
        self.write_metadata()
