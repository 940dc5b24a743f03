"""A busy machine on demand: shell loops spinning on the CPU, bounded in time, stopped as one group.

Used by the diagnosis scenarios (``cpu_contention`` starts it from the training
script) and by the benchmark (the ``busy_machine`` control starts it from the
harness). No torch, no mlprof.
"""

from __future__ import annotations

import os
import signal
import subprocess

__all__ = ["start_busy", "stop_busy"]


def start_busy(n: int, seconds: int = 60) -> subprocess.Popen:
    """``n`` shell loops in a new process group; ``timeout`` ends them after ``seconds`` at the latest."""
    loops = " & ".join(["while :; do :; done"] * n)
    return subprocess.Popen(["timeout", "-s", "KILL", str(seconds), "sh", "-c", f"{loops} & wait"],
                            start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def stop_busy(proc: subprocess.Popen) -> None:
    """Kill the whole group (timeout, its shell and every loop) and reap it."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()
