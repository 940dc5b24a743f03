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
from .capture_writer import make_private_dir

__all__ = ["spawn_analysis", "wait_for_analysis", "ANALYSE_CHILD_ENV"]

logger = logging.getLogger("mlprof")

# Set in the child so that mlprof's start-up hooks never profile the parser.
ANALYSE_CHILD_ENV = "MLPROF_ANALYSE_CHILD"
_STRIPPED_ENV = ("MLPROF_PROFILING_OPTIONS", "MLPROF_CONFIG_PATH")

_children: list[subprocess.Popen] = []


def _reap() -> None:
    _children[:] = [child for child in _children if child.poll() is None]


def spawn_analysis(capture_dir: Path) -> subprocess.Popen:
    _reap()
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
    _children.append(child)
    return child


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
