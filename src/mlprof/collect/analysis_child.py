"""Parsing a finished window off the training thread, in a child process.

The child is a fresh interpreter (``python -m mlprof parse DIR``), never a
fork of the training process, started at low priority; its output goes to
``logs/analyse.log`` in the capture.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
from pathlib import Path

from ..capture import layout
from ..capture.files import make_private_dir

__all__ = ["spawn_analysis", "flush_analysis", "wait_for_analysis", "ANALYSE_CHILD_ENV"]

logger = logging.getLogger("mlprof")

# Set in the child so that mlprof's start-up hooks never profile the parser.
ANALYSE_CHILD_ENV = "MLPROF_ANALYSE_CHILD"
_STRIPPED_ENV = ("MLPROF_PROFILING_OPTIONS", "MLPROF_CONFIG_PATH")

_children: list[subprocess.Popen] = []
# Captures whose newest windows wait for the parse already running on them.
_pending: set[Path] = set()


def _reap() -> None:
    _children[:] = [child for child in _children if child.poll() is None]


def spawn_analysis(capture_dir: Path, force: bool = False) -> subprocess.Popen | None:
    """Parse the capture in a child; with one already parsing it, parse again later (flush_analysis).

    Windows closing faster than they parse would otherwise pile up parsers
    competing with training for the CPU.
    """
    _reap()
    if not force and any(child.capture_dir == capture_dir for child in _children):
        _pending.add(capture_dir)
        return None
    _pending.discard(capture_dir)
    log_dir = make_private_dir(capture_dir / layout.LOG_DIR)
    env = {k: v for k, v in os.environ.items() if k not in _STRIPPED_ENV}
    env[ANALYSE_CHILD_ENV] = "1"
    fd = os.open(log_dir / "analyse.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, layout.FILE_MODE)
    try:
        child = subprocess.Popen(
            [sys.executable, "-m", "mlprof", "parse", str(capture_dir)],
            stdin=subprocess.DEVNULL,
            stdout=fd,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,  # a Ctrl-C aimed at training must not kill the parse
            close_fds=True,
        )
    finally:
        os.close(fd)
    try:
        os.setpriority(os.PRIO_PROCESS, child.pid, 10)
    except (AttributeError, OSError):
        pass
    child.capture_dir = capture_dir  # type: ignore[attr-defined]
    _children.append(child)
    return child


def flush_analysis(capture_dir: Path) -> None:
    """At the end of profiling: parse once more if windows arrived during a parse.

    The new child waits on the output's lock for the running one, never the job.
    """
    if capture_dir in _pending:
        spawn_analysis(capture_dir, force=True)


def wait_for_analysis(timeout_s: float | None = None) -> bool:
    """Wait for the analysis children of this process; True when all ended."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    for child in list(_children):
        remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
        try:
            child.wait(remaining)
        except subprocess.TimeoutExpired:
            return False
    _reap()
    return True
