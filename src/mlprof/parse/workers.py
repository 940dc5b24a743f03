"""Run parts of a decode in forked child processes (Linux), results by pickle.

The parser reads the file once; ``fork`` gives each child the decoded
top level for free (copy-on-write), so a child only decodes its own range of
events and sends back compact numpy columns. With one CPU, off Linux, or with
``MLPROF_PARSE_WORKERS=1`` everything runs in the calling process.
"""

from __future__ import annotations

import os
import pickle
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass

from mlprof.errors import MlprofError

__all__ = ["worker_count", "ForkedPart", "start_part", "finish_part", "abandon_part"]

_MIN_EVENTS_PER_WORKER = 200_000


def worker_count(n_events: int, per_worker: int = _MIN_EVENTS_PER_WORKER) -> int:
    """Processes worth using for ``n_events`` units of work (at least ``per_worker`` each)."""
    if not sys.platform.startswith("linux") or not hasattr(os, "fork"):
        return 1
    env = os.environ.get("MLPROF_PARSE_WORKERS")
    if env:  # an explicit count is obeyed, whatever the trace's size
        try:
            return max(1, int(env))
        except ValueError:
            return 1
    wanted = min(os.cpu_count() or 1, 4)
    return max(1, min(wanted, n_events // per_worker))


@dataclass
class ForkedPart:
    pid: int
    result_path: str


def start_part(work: Callable[[], object]) -> ForkedPart:
    """Fork a child that runs ``work()`` and pickles its result (or its MlprofError)."""
    fd, result_path = tempfile.mkstemp(prefix="mlprof_part_", suffix=".pickle")
    pid = os.fork()
    if pid == 0:  # child: never return into the caller's code
        status = 0
        try:
            try:
                payload = ("ok", work())
            except MlprofError as exc:
                payload = ("error", exc)
            with os.fdopen(fd, "wb") as fh:
                pickle.dump(payload, fh, protocol=pickle.HIGHEST_PROTOCOL)
        except BaseException:
            status = 1
        finally:
            os._exit(status)
    os.close(fd)
    return ForkedPart(pid, result_path)


def finish_part(part: ForkedPart) -> object:
    """Wait for a part; its result, or re-raise the MlprofError it met."""
    try:
        _, status = os.waitpid(part.pid, 0)
        if os.waitstatus_to_exitcode(status) != 0:
            raise MlprofError(f"a parse worker process failed (exit status {os.waitstatus_to_exitcode(status)})")
        with open(part.result_path, "rb") as fh:
            kind, value = pickle.load(fh)
    finally:
        try:
            os.unlink(part.result_path)
        except OSError:
            pass
    if kind == "error":
        raise value
    return value


def abandon_part(part: ForkedPart) -> None:
    """Stop a part whose result is no longer wanted (the caller failed)."""
    try:
        os.kill(part.pid, 9)
        os.waitpid(part.pid, 0)
    except OSError:
        pass
    try:
        os.unlink(part.result_path)
    except OSError:
        pass
