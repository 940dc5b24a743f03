"""A thread's run-queue delay: how long it was ready to run while other processes held the cores.

Linux keeps it in the thread's ``schedstat`` (second field, ns). The step clock
reads it at step boundaries, the stack sampler between samples; both read it
here. About 2 us a read. Nothing here imports torch.
"""

from __future__ import annotations

import os

__all__ = ["open_schedstat", "run_delay_ns", "on_cpu_and_delay_ns"]


def open_schedstat(tid: int | None = None) -> int | None:
    """A descriptor on thread ``tid``'s schedstat (None: the calling thread's); None where there is none."""
    path = "/proc/thread-self/schedstat" if tid is None else f"/proc/self/task/{tid}/schedstat"
    try:
        return os.open(path, os.O_RDONLY)
    except OSError:  # not Linux, or the thread is gone
        return None


def run_delay_ns(fd: int | None) -> int | None:
    """The thread's total run-queue delay so far, ns; None where not measured."""
    return on_cpu_and_delay_ns(fd)[1]


def on_cpu_and_delay_ns(fd: int | None) -> tuple[int | None, int | None]:
    """The thread's total time on a CPU and its run-queue delay so far, ns (one read); Nones where not measured.

    The time on a CPU is the scheduler's own clock of the thread (first field): under KVM with steal
    accounting it leaves out the time the hypervisor gave the core to another guest.
    """
    if fd is None:
        return None, None
    try:
        fields = os.pread(fd, 128, 0).split()
        return int(fields[0]), int(fields[1])
    except (OSError, ValueError, IndexError):
        return None, None
