"""The dashboard's expensive answers (advisor, compare, cluster) kept on disk beside the run's tables.

An answer is a pure function of the tables it read, so it is stored under a key made of those tables'
signatures (inode and mtime of each ``tables/`` dir: a re-parse swaps it) and mlprof's version, in
``<output dir>/ui_cache/<name>-<key hash>.json``. A restarted ``mlprof ui`` (or one of its 8 open runs
closed to open a ninth) answers from the file instead of running the analysis again; an answer of
another key under the same name is removed when a new one is written. Nothing here may fail a page:
a cache that cannot be read is recomputed, one that cannot be written is skipped, and a ``ui_cache``
that is a symbolic link is never followed.
"""

from __future__ import annotations

import hashlib
import logging
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

import msgspec

from mlprof._version import __version__
from mlprof.tables.layout import TABLES_DIR

__all__ = ["CACHE_DIR", "cached_answer", "tables_signature"]

CACHE_DIR = "ui_cache"
log = logging.getLogger(__name__)


def tables_signature(run_dir: Path) -> tuple[int, int]:
    """(inode, mtime ns) of a run's ``tables/`` dir: changes when a parse rewrites the tables."""
    st = (run_dir / TABLES_DIR).stat()
    return st.st_ino, st.st_mtime_ns


def _path(run_dir: Path, name: str, key: object) -> Path:
    digest = hashlib.sha256(repr((key, __version__)).encode()).hexdigest()[:20]
    return run_dir / CACHE_DIR / f"{name}-{digest}.json"


def cached_answer(run_dir: Path, name: str, key: object, compute: Callable[[], dict]) -> dict:
    """``compute()``, or the answer stored for (``name``, ``key``) in ``run_dir``'s cache; stored when computed.
    ``name`` is a file-name-safe word; ``key`` a repr-stable value naming everything the answer read."""
    path = _path(run_dir, name, key)
    cache_dir = path.parent
    if not cache_dir.is_symlink():
        try:
            return msgspec.json.decode(path.read_bytes())
        except (OSError, msgspec.DecodeError):
            pass
    answer = compute()
    _store(cache_dir, path, name, answer)
    return answer


def _store(cache_dir: Path, path: Path, name: str, answer: dict) -> None:
    try:
        if cache_dir.is_symlink():
            return
        cache_dir.mkdir(mode=0o700, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=cache_dir, prefix=f".{name}-", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(msgspec.json.encode(answer))
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        for old in cache_dir.glob(f"{name}-*.json"):
            if old != path:
                old.unlink(missing_ok=True)
    except (OSError, TypeError, msgspec.EncodeError) as exc:  # a read-only output, a full disk: no cache
        log.debug("answer cache %s not written: %s", path, exc)
