"""Safe writing, for collection and parsing alike: private modes, temp-and-rename, a lock.

Everything mlprof writes appears complete or not at all (a job can be killed
at any moment), with the private modes of docs/capture_format.md.
``mlprof parse`` is started by the collector after every window, so two runs
can meet on one capture: the output lock serialises them.
"""

from __future__ import annotations

import errno
import fcntl
import os
import shutil
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from mlprof.capture.layout import DIR_MODE, FILE_MODE
from mlprof.errors import CaptureError, MlprofError

__all__ = ["DIR_MODE", "FILE_MODE", "make_private_dir", "refuse_link", "atomic_write", "write_json_atomic",
           "output_lock", "replace_dir", "publish_file"]


def make_private_dir(path: Path, what: str = "output directory") -> Path:
    """``path`` as a directory, created (with any missing parents) with the private mode when missing.

    Only a directory made here gets the mode: an existing one keeps its own (a
    user's ``--output /shared/tmp``, sticky 1777, stays 1777), and chmod never
    reaches the target of a symlink.
    """
    try:
        try:
            os.mkdir(path, DIR_MODE)
        except FileNotFoundError:
            path.parent.mkdir(parents=True, exist_ok=True)
            os.mkdir(path, DIR_MODE)
        # mkdir's mode passed through the umask: give the new directory exactly the private mode.
        os.chmod(path, DIR_MODE)
    except FileExistsError:
        if not path.is_dir():
            raise MlprofError(f"{path}: cannot create {what}: it exists and is not a directory") from None
    except OSError as exc:
        raise MlprofError(f"{path}: cannot create {what}: {exc.strerror or exc}") from None
    return path


def refuse_link(path: Path, what: str) -> Path:
    """``path`` when it is not a symlink: mlprof never makes one where it writes, so one there was
    planted (by whoever could write the capture) to send mlprof's writes elsewhere."""
    if os.path.islink(path):
        raise CaptureError(f"{path}: the {what} is a symlink, which mlprof never makes; refusing to write "
                           "through it (remove it, or parse with --output)")
    return path


def atomic_write(path: Path, data: bytes | str | Iterable[bytes | str]) -> Path:
    """Write ``data`` to ``path`` through a temporary name in the same directory (``data`` may come in
    chunks, written as they come: a file of millions of rows is never held whole)."""
    chunks = [data] if isinstance(data, (bytes, str)) else data
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        # O_EXCL | O_NOFOLLOW: never through a symlink planted under the temporary name.
        tmp.unlink(missing_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, FILE_MODE)
        with os.fdopen(fd, "wb") as fh:
            for chunk in chunks:
                fh.write(chunk.encode("utf-8") if isinstance(chunk, str) else chunk)
        os.chmod(tmp, FILE_MODE)
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise MlprofError(f"{path}: cannot write: {exc.strerror or exc}") from None
    except BaseException:  # the chunks' source failed: no half-written file
        tmp.unlink(missing_ok=True)
        raise
    return path


def write_json_atomic(path: Path, data: object) -> Path:
    """``data`` (a record of mlprof.capture.records, or plain JSON values) as compact JSON, through a
    temporary name."""
    from mlprof.capture.records import encode  # here: `import mlprof` stays free of msgspec

    return atomic_write(path, encode(data))


def publish_file(tmp: Path, path: Path) -> Path:
    """Give a finished temporary file its final name (and private mode)."""
    os.chmod(tmp, FILE_MODE)
    os.replace(tmp, path)
    return path


def replace_dir(new: Path, final: Path) -> None:
    """Swap a finished directory into place; the old one is removed after."""
    for child in new.rglob("*"):
        os.chmod(child, DIR_MODE if child.is_dir() else FILE_MODE)
    os.chmod(new, DIR_MODE)
    old = final.with_name(f".old_{final.name}_{os.getpid()}")
    if final.exists():
        os.replace(final, old)
    os.replace(new, final)
    shutil.rmtree(old, ignore_errors=True)


@contextmanager
def output_lock(out_dir: Path) -> Iterator[None]:
    """Exclusive lock on an output directory (waits for a concurrent parse).

    The lock file ``.lock`` is removed on release, while still held: a parse
    that was waiting on it then finds it gone (or a newer one at its name) and
    locks the file at the name, so two parses never hold different files.
    """
    make_private_dir(out_dir)
    path = out_dir / ".lock"
    while True:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, FILE_MODE)
        except OSError as exc:
            why = "a symlink; refusing to use it" if exc.errno == errno.ELOOP else exc.strerror or exc
            raise MlprofError(f"{path}: cannot open the output lock: {why}") from None
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            if os.path.samestat(os.fstat(fd), os.lstat(path)):
                break
        except FileNotFoundError:
            pass
        os.close(fd)
    try:
        # Leftovers of a run that was killed while writing.
        for stale in out_dir.glob(".tmp_*"):
            shutil.rmtree(stale, ignore_errors=True) if stale.is_dir() else stale.unlink(missing_ok=True)
        yield
    finally:
        try:
            os.unlink(path)
        except OSError:
            pass
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
