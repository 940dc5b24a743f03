"""One profiling task per device at a time (msprof's rule), with locks the kernel releases.

``flock`` locks vanish when their process dies, so a crashed ``mlprof run``
never leaves a device locked; the lock file only remembers who held it last,
for the message. A run on all devices takes the ``all`` lock exclusively;
a run on some devices shares ``all`` and takes each device's lock.
"""

from __future__ import annotations

import errno
import fcntl
import glob
import json
import os
import stat
import time
from pathlib import Path

from ..errors import MlprofError
from ..private_dirs import check_private_dir, private_user_dir

__all__ = ["DeviceLock", "LOCK_DIR_ENV", "devices_of", "default_lock_dir", "host_has_accelerator"]

LOCK_DIR_ENV = "MLPROF_LOCK_DIR"


# Device nodes of the accelerators a profiling task would hold: NVIDIA, Ascend, AMD (ROCm).
_ACCELERATOR_NODES = ("/dev/nvidia[0-9]*", "/dev/davinci[0-9]*", "/dev/kfd")


def host_has_accelerator() -> bool:
    return any(glob.glob(pattern) for pattern in _ACCELERATOR_NODES)


def devices_of(environment: dict[str, str], has_accelerator: bool | None = None) -> list[str]:
    """The devices a job will use: CUDA_VISIBLE_DEVICES, else all of them; none on a host without
    accelerators, where CPU-only runs have nothing to share and never refuse each other."""
    if not (host_has_accelerator() if has_accelerator is None else has_accelerator):
        return []
    visible = environment.get("CUDA_VISIBLE_DEVICES")
    if visible is None or not visible.strip():
        return ["all"]
    return [d.strip() for d in visible.split(",") if d.strip()]


def default_lock_dir() -> Path:
    """A private per-user directory: $XDG_RUNTIME_DIR/mlprof-locks, else /tmp/mlprof-locks-<uid>, else (when
    another user made that one first) one under the home directory (:func:`mlprof.private_dirs.private_user_dir`).

    Never a directory shared between users: a lock file there could be a
    symlink planted by another user, and a root run would write through it.
    """
    return private_user_dir("mlprof-locks", "device lock directory")


def _private_dir(path: Path) -> Path:
    """Create a lock directory given by name (``MLPROF_LOCK_DIR``) 0700, or check an existing one is a
    real directory of ours, not open to others; else refuse it."""
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        raise MlprofError(f"{path}: cannot create the device lock directory: {exc.strerror or exc}") from None
    why = check_private_dir(path)
    if why is not None:
        raise MlprofError(f"{path}: device lock directory: {why}; refusing to use it")
    return path


class DeviceLock:
    def __init__(self, devices: list[str], lock_dir: Path | None = None) -> None:
        self.devices = devices
        # The default is found (and made) when a device is first locked: a CPU-only run makes no directory.
        named = lock_dir or os.environ.get(LOCK_DIR_ENV)
        self.lock_dir = Path(named) if named else None
        self._fds: list[int] = []

    def _open(self, name: str) -> int:
        if self.lock_dir is None:
            self.lock_dir = default_lock_dir()
        else:
            _private_dir(self.lock_dir)
        path = self.lock_dir / f"device-{name.replace('/', '_')}.lock"
        try:
            # O_NOFOLLOW: a symlink planted as the lock file is refused, never written through.
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, 0o600)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise MlprofError(f"{path}: lock file is a symlink; refusing to use it") from None
            raise MlprofError(f"{path}: cannot open the device lock: {exc.strerror or exc}") from None
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() or st.st_nlink != 1:
            os.close(fd)
            raise MlprofError(f"{path}: lock file is not a plain file of this user; refusing to use it")
        return fd

    def _take(self, name: str, exclusive: bool) -> None:
        fd = self._open(name)
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
        if not self.devices:
            return self  # a CPU-only host: nothing to hold
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
