"""Safe writing, for collection and parsing alike: private modes, temp-and-rename, a lock.

Everything mlprof writes appears complete or not at all (a job can be killed
at any moment), with the private modes of docs/capture_format.md.
``mlprof parse`` is started by the collector after every window, so two runs
can meet on one capture: the output lock serialises them.
"""

from __future__ import annotations

import fcntl
import os
import shutil
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from mlprof.capture.layout import DIR_MODE, FILE_MODE
from mlprof.errors import MlprofError

__all__ = ["DIR_MODE", "FILE_MODE", "make_private_dir", "atomic_write", "write_json_atomic", "output_lock",
           "replace_dir", "publish_file"]


def make_private_dir(path: Path) -> Path:
    try:
        path.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
        os.chmod(path, DIR_MODE)
    except OSError as exc:
        raise MlprofError(f"{path}: cannot create output directory: {exc.strerror or exc}") from None
    return path


def atomic_write(path: Path, data: bytes | str | Iterable[bytes | str]) -> Path:
    """Write ``data`` to ``path`` through a temporary name in the same directory (``data`` may come in
    chunks, written as they come: a file of millions of rows is never held whole)."""
    chunks = [data] if isinstance(data, (bytes, str)) else data
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
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
    """Exclusive lock on an output directory (waits for a concurrent parse)."""
    make_private_dir(out_dir)
    fd = os.open(out_dir / ".lock", os.O_RDWR | os.O_CREAT, FILE_MODE)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        # Leftovers of a run that was killed while writing.
        for stale in out_dir.glob(".tmp_*"):
            shutil.rmtree(stale, ignore_errors=True) if stale.is_dir() else stale.unlink(missing_ok=True)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
