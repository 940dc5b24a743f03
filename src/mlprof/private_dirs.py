"""Directories of this user alone, outside the paths a command was given: the one place mlprof makes them.

A shared temporary directory (``/tmp``, sticky, 1777) lets any user create any
name first. A predictable name there (``mlprof-spill-<pid>-<n>``) can be a
directory another user made, holding symlinks that a later write follows
(DuckDB opened its ``duckdb_temp_*`` files through them: a victim file was
overwritten with spill data). So:

- :func:`private_temp_dir`: a process's scratch space (DuckDB's spill), made by
  ``mkdtemp`` (a random name, created 0700, refused if it exists), removed at exit.
- :func:`private_user_dir`: a directory all of one user's processes must find
  by name (device locks, the web UI's server records). It is used only when it
  is a real directory of this user, closed to others; one that another user
  made first is not refused with an error (that would let them refuse every
  ``mlprof run``): mlprof says so on stderr and uses one under the user's home.
"""

from __future__ import annotations

import atexit
import os
import shutil
import socket
import stat
import sys
import tempfile
import threading
from pathlib import Path

from mlprof.errors import MlprofError, printable

__all__ = ["private_temp_dir", "private_user_dir", "check_private_dir"]

_lock = threading.Lock()
_temp: tuple[int, Path] | None = None  # (pid that made it, path)


def private_temp_dir() -> Path:
    """This process's own directory in the system's temporary directory (``mlprof-<random>``, 0700),
    made on the first call, removed when the process exits. A forked child shares its parent's (names
    inside it carry the child's pid) and leaves its removal to the parent."""
    global _temp
    with _lock:
        if _temp is None or not _temp[1].is_dir():
            try:
                path = Path(tempfile.mkdtemp(prefix="mlprof-"))
            except OSError as exc:
                raise MlprofError(f"{tempfile.gettempdir()}: cannot create a private temporary directory: "
                                  f"{exc.strerror or exc}") from None
            _temp = (os.getpid(), path)
            atexit.register(_remove_temp, os.getpid(), path)
        return _temp[1]


def _remove_temp(pid: int, path: Path) -> None:
    if os.getpid() == pid:  # not in a forked child that exits through atexit
        shutil.rmtree(path, ignore_errors=True)


def check_private_dir(path: Path) -> str | None:
    """Why ``path`` is not a private directory of this user (None: it is). A directory of this user
    that others may enter is closed (0700) first: only its owner could have opened it."""
    try:
        st = os.lstat(path)
    except OSError as exc:
        return f"cannot read it: {exc.strerror or exc}"
    if stat.S_ISLNK(st.st_mode):
        return "it is a symlink"
    if not stat.S_ISDIR(st.st_mode):
        return "it is not a directory"
    if st.st_uid != os.geteuid():
        return f"it belongs to uid {st.st_uid}, not to this user (uid {os.geteuid()})"
    if st.st_mode & 0o077:
        try:
            os.chmod(path, 0o700)
        except OSError as exc:
            return f"cannot make it private: {exc.strerror or exc}"
    return None


def _make(path: Path) -> str | None:
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except OSError as exc:
        return f"cannot create it: {exc.strerror or exc}"
    return check_private_dir(path)


def _home_dir(name: str) -> Path:
    # The host in the name: a home shared between hosts (NFS) must not share one host's device locks.
    cache = os.environ.get("XDG_CACHE_HOME")
    base = Path(cache) if cache and os.path.isabs(cache) else Path.home() / ".cache"
    return base / "mlprof" / f"{name}-{socket.gethostname()}"


def private_user_dir(name: str, what: str) -> Path:
    """``$XDG_RUNTIME_DIR/<name>``, else ``<temp dir>/<name>-<uid>``; when the latter is not a private
    directory of this user, ``~/.cache/mlprof/<name>-<host>`` (``$XDG_CACHE_HOME``), with a line on stderr.
    ``what`` names the directory in messages ("device lock directory")."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and os.path.isabs(runtime) and os.path.isdir(runtime):
        path = Path(runtime) / name
        why = _make(path)
        if why is None:
            return path
        raise MlprofError(f"{path}: cannot use it as the {what}: {why}")
    shared = Path(tempfile.gettempdir()) / f"{name}-{os.geteuid()}"
    why = _make(shared)
    if why is None:
        return shared
    home = _home_dir(name)
    why_home = _make(home)
    if why_home is not None:
        raise MlprofError(f"{shared}: cannot use it as the {what} ({why}), nor {home} ({why_home})")
    sys.stderr.write(printable(f"mlprof: {shared}: not used as the {what} ({why}); using {home}") + "\n")
    return home
