"""Opening an input SQLite database (torch_npu's export) strictly read-only: nothing added to its folder.

``sqlite3.connect(f"file:{path}?mode=ro", uri=True)`` had two faults:

- the path went into the URI raw: a ``#`` or ``?`` in a folder name cut it
  (SQLite then created an empty database named after the part before it) and
  let a folder name add URI options of its own. The path is now
  percent-encoded (:meth:`pathlib.Path.as_uri`).
- ``mode=ro`` still needs the ``-shm`` index beside a WAL database (torch_npu
  writes in WAL mode): SQLite created ``-shm`` and ``-wal`` files in the input
  folder, and on read-only media (or a folder the user may not write) it
  failed with "attempt to write a readonly database".

A finished export holds all its data in the database file, so it is opened
``immutable=1``: no locks, no ``-shm``/``-wal``/``-journal``, nothing written.
``immutable`` ignores a ``-wal`` or hot ``-journal`` beside the file, which
would still hold committed rows when the writer was killed; then the database
and that file are copied into a private temporary directory
(:func:`mlprof.private_dirs.private_temp_dir`) and the copy is opened, so
SQLite applies them there.
"""

from __future__ import annotations

import shutil
import sqlite3
import tempfile
from pathlib import Path

from mlprof.private_dirs import private_temp_dir

__all__ = ["open_read_only"]

# Files SQLite keeps beside a database while it is written; one with data in it holds committed rows.
_SIDE_FILES = ("-wal", "-journal")


def _pending(path: Path) -> list[Path]:
    found = []
    for suffix in _SIDE_FILES:
        side = path.with_name(path.name + suffix)
        try:
            if side.is_file() and side.stat().st_size > 0:
                found.append(side)
        except OSError:
            continue
    return found


class _Connection(sqlite3.Connection):
    """A connection that removes its private copy of the database when closed."""

    copy_dir: Path | None = None

    def close(self) -> None:
        super().close()
        if self.copy_dir is not None:
            shutil.rmtree(self.copy_dir, ignore_errors=True)
            self.copy_dir = None


def open_read_only(path: Path) -> sqlite3.Connection:
    """A connection to the database at ``path`` that never writes beside it (close it when done).
    Raises :class:`sqlite3.Error` (or OSError copying it) as ``sqlite3.connect`` would."""
    path = Path(path).absolute()
    pending = _pending(path)
    if not pending:
        return sqlite3.connect(f"{path.as_uri()}?immutable=1", uri=True, factory=_Connection)
    copy_dir = Path(tempfile.mkdtemp(prefix="sqlite-", dir=private_temp_dir()))
    try:
        for source in (path, *pending):
            shutil.copyfile(source, copy_dir / source.name)
        con = sqlite3.connect(f"{(copy_dir / path.name).as_uri()}?mode=rw", uri=True, factory=_Connection)
    except BaseException:
        shutil.rmtree(copy_dir, ignore_errors=True)
        raise
    con.copy_dir = copy_dir
    return con
