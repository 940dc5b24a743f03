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


def start_busy(n: int, seconds: int = 60, same_session: bool = False) -> subprocess.Popen:
    """``n`` shell loops in a new process group; ``timeout`` ends them after ``seconds`` at the latest.

    ``same_session``: stay in the caller's session. With the kernel's autogroup
    scheduling (``/proc/sys/kernel/sched_autogroup_enabled``) each session shares
    the CPU as one group, so loops in a session of their own take at most that
    group's share from the caller: a busy *machine* (another job), while loops
    in the caller's session compete with it thread for thread (helpers the job
    itself started).
    """
    loops = " & ".join(["while :; do :; done"] * n)
    group = {"process_group": 0} if same_session else {"start_new_session": True}
    return subprocess.Popen(["timeout", "-s", "KILL", str(seconds), "sh", "-c", f"{loops} & wait"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **group)


def stop_busy(proc: subprocess.Popen) -> None:
    """Kill the whole group (timeout, its shell and every loop) and reap it."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()
