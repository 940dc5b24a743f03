"""Writes the raw capture directory (docs/capture_format.md).

Every file goes to a temporary name and is renamed into place; each window is
written in a ``.partial_`` directory renamed when complete. So a job killed at
any point leaves only whole files and finished windows behind.
"""

from __future__ import annotations

import os
import shutil
import socket
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from .._version import __version__
from ..capture import layout
from ..errors import MlprofError
from ..capture.files import make_private_dir, write_json_atomic
from ..capture.records import Manifest, CaptureMetadata, Clock, Versions, WindowEntry, WindowInfo
from .environment import performance_environment, rank_info, system_info

__all__ = ["CaptureWriter", "default_worker_name"]


def default_worker_name() -> str:
    return f"{socket.gethostname()}_{os.getpid()}"


class CaptureWriter:
    """One capture directory for one profiling session; ``manifest`` is its profiler_info.json."""

    def __init__(self, output: Path, worker_name: str, config: dict[str, Any]) -> None:
        stamp = datetime.now().strftime("%Y%m%d%H%M%S%f")[:-3]
        make_private_dir(output)
        self.path = output / layout.capture_dir_name(worker_name, stamp)
        suffix = 1
        while self.path.exists():  # two sessions in the same millisecond
            self.path = output / layout.capture_dir_name(worker_name, stamp, suffix)
            suffix += 1
        make_private_dir(self.path)
        make_private_dir(self.path / layout.RAW_DIR)
        torch = sys.modules.get("torch")
        self.manifest = Manifest(
            schema_version=layout.SCHEMA_VERSION,
            status=layout.STATUS_RUNNING,
            worker_name=worker_name,
            host=socket.gethostname(),
            pid=os.getpid(),
            **rank_info(),
            versions=Versions(mlprof=__version__, torch=_text(getattr(torch, "__version__", None)),
                              python=sys.version.split()[0]),
            config=config,
            clock=Clock(wall_ns=time.time_ns(), monotonic_ns=time.monotonic_ns()),
            created_wall_ns=time.time_ns(),
        )
        self.user_metadata: dict[str, Any] = {}
        # One entry per written window: its torch settings (collect/torch_state.py).
        self.torch_state: list[dict[str, Any]] = []
        self.write_manifest()
        self.write_metadata()

    def write_manifest(self) -> None:
        write_json_atomic(self.path / layout.INFO_FILE, self.manifest)

    def write_metadata(self) -> None:
        write_json_atomic(self.path / layout.METADATA_FILE, CaptureMetadata(
            user=self.user_metadata, environment=performance_environment(), system=system_info(),
            torch_state=self.torch_state))

    def begin_window(self, window_index: int) -> Path:
        partial = self.path / layout.RAW_DIR / layout.partial_dir_name(window_index)
        return make_private_dir(partial)

    def finish_window(self, window_index: int, partial: Path, window: dict[str, Any]) -> Path:
        """Write window.json (``window``: WindowInfo fields), publish the window and list it in the manifest."""
        for child in partial.iterdir():
            os.chmod(child, layout.FILE_MODE)
        info = WindowInfo(index=window_index, status=layout.STATUS_COMPLETE, **window)
        write_json_atomic(partial / layout.WINDOW_FILE, info)
        final = self.path / layout.RAW_DIR / layout.window_dir_name(window_index)
        os.replace(partial, final)
        self.manifest.windows.append(WindowEntry(
            dir=layout.window_rel_dir(window_index), index=window_index, status=info.status, first_step=info.first_step,
            last_step=info.last_step, start_ns=info.start_ns, end_ns=info.end_ns))
        # Refresh the rank: torch.distributed may have been initialised after start().
        for key, value in rank_info().items():
            setattr(self.manifest, key, value)
        self.write_manifest()
        self.write_metadata()
        return final

    def discard_partial_windows(self) -> None:
        """Remove windows left half written by a failure: no reader takes them, and on a full
        disk their space is what lets the manifest record the failure."""
        raw = self.path / layout.RAW_DIR
        for partial in raw.glob(f"{layout.PARTIAL_PREFIX}*"):
            shutil.rmtree(partial, ignore_errors=True)

    def close(self, status: str, error: str | None = None) -> None:
        self.manifest.status = status
        self.manifest.error = error
        try:
            self.write_manifest()
        except MlprofError:
            if status != layout.STATUS_FAILED or not self._rewrite_manifest_in_place():
                raise
            return  # the disk is full: the failure is recorded, the metadata can wait
        self.write_metadata()

    def _rewrite_manifest_in_place(self) -> bool:
        """Record a failure when the disk has no room for a new file (a full disk is the usual
        failure): overwrite profiler_info.json in the space it already holds, which needs no new
        block. Only when the new text fits that space; True when it was written."""
        from ..capture.records import encode

        data = encode(self.manifest)
        try:
            fd = os.open(self.path / layout.INFO_FILE, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            return False
        try:
            st = os.fstat(fd)
            if len(data) > st.st_blocks * 512:
                return False
            if os.pwrite(fd, data, 0) != len(data):
                return False
            os.ftruncate(fd, len(data))
        except OSError:
            return False
        finally:
            os.close(fd)
        return True


def _text(value: Any) -> str | None:
    return None if value is None else str(value)
