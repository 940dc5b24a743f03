"""One profiling task per device at a time (msprof's rule), with locks the kernel releases.

``flock`` locks vanish when their process dies, so a crashed ``mlprof run``
never leaves a device locked; the lock file only remembers who held it last,
for the message. A run on all devices takes the ``all`` lock exclusively;
a run on some devices shares ``all`` and takes each device's lock.
"""

from __future__ import annotations

import fcntl
import json
import os
import tempfile
import time
from pathlib import Path

from ..errors import MlprofError

__all__ = ["DeviceLock", "LOCK_DIR_ENV", "devices_of"]

LOCK_DIR_ENV = "MLPROF_LOCK_DIR"


def devices_of(environment: dict[str, str]) -> list[str]:
    """The devices a job will use: CUDA_VISIBLE_DEVICES, else all of them."""
    visible = environment.get("CUDA_VISIBLE_DEVICES")
    if visible is None or not visible.strip():
        return ["all"]
    return [d.strip() for d in visible.split(",") if d.strip()]


class DeviceLock:
    def __init__(self, devices: list[str], lock_dir: Path | None = None) -> None:
        self.devices = devices
        self.lock_dir = lock_dir or Path(os.environ.get(LOCK_DIR_ENV) or Path(tempfile.gettempdir()) / "mlprof-locks")
        self._fds: list[int] = []

    def _take(self, name: str, exclusive: bool) -> None:
        self.lock_dir.mkdir(parents=True, exist_ok=True)
        path = self.lock_dir / f"device-{name.replace('/', '_')}.lock"
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_holder(fd)
            os.close(fd)
            self.release()
            device = "all devices" if name == "all" else f"device {name}"
            raise MlprofError(f"{device} is already being profiled by another mlprof run ({holder}); "
                              "only one profiling task per device runs at a time") from None
        if exclusive:
            os.ftruncate(fd, 0)
            os.pwrite(fd, json.dumps({"pid": os.getpid(), "since": time.strftime("%Y-%m-%d %H:%M:%S")}).encode(), 0)
        self._fds.append(fd)

    def acquire(self) -> "DeviceLock":
        if self.devices == ["all"]:
            self._take("all", exclusive=True)
        else:
            self._take("all", exclusive=False)
            for device in self.devices:
                self._take(device, exclusive=True)
        return self

    def release(self) -> None:
        for fd in self._fds:
            try:
                fcntl.flock(fd, fcntl.LOCK_UN)
            finally:
                os.close(fd)
        self._fds = []

    def __enter__(self) -> "DeviceLock":
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def _read_holder(fd: int) -> str:
    try:
        data = json.loads(os.pread(fd, 4096, 0) or b"{}")
        return f"pid {data['pid']}, since {data['since']}"
    except (OSError, ValueError, KeyError):
        return "holder unknown"
