"""A fixed piece of work timed between a window's steps: how fast the host ran the job at that moment.

Two runs of the same code on a shared VM differ by up to 40% in step time with
no wait for a core to show it: the host itself runs slower for seconds at a
time (a busy neighbour on the physical core, its caches, its clock). A probe
timed beside the steps sees the same slowdown, so ``compare`` can divide each
step by the speed the host ran at around it (``analysis/compare_speed.py``).

The probe is the job's kind of work on the job's threads: a small torch matmul
(into a preallocated output, so it allocates nothing), timed by the stepping
thread's CPU clock, so a wait for a core does not count. Measured on a 2-vCPU
KVM guest (``benchmarks/host_speed.py --interleaved``), same-code runs spread
by 10-22% in median step time and 2-12% after the division; a pure-Python loop
tracked one-thread jobs as well but not two-thread ones.

Recorded only inside windows, between the end of one step and the start of the
next (never inside a step's timed span: mlprof's step record and the trace's
``ProfilerStep#N`` span both end before it), with torch's RecordFunction off so
the profiler does not see it, and at most every ``PROBE_SHARE`` of the time: a
probe of 0.3 ms runs after every step of 15 ms or more, after every fifth of
3 ms steps.
"""

from __future__ import annotations

import time
from typing import Any

__all__ = ["SpeedProbe", "PROBE_SHARE", "PROBE_SIZE", "PROBE_REPEATS"]

# The probe takes at most this share of the window's time.
PROBE_SHARE = 0.02
# A PROBE_SIZE x PROBE_SIZE matmul, PROBE_REPEATS times: about 0.3 ms on one 2020s core.
PROBE_SIZE = 96
PROBE_REPEATS = 20


class SpeedProbe:
    """Times the probe when it is due; the caller stores the result with the step that just ended."""

    def __init__(self) -> None:
        self._tensors: tuple[Any, Any, Any] | None = None
        self._torch: Any = None
        self._next_ns = 0  # monotonic ns before which the probe is not due

    def maybe_run(self) -> int | None:
        """The probe's CPU time in ns if it was due, else None."""
        now = time.monotonic_ns()
        if now < self._next_ns:
            return None
        if self._tensors is None:
            import torch

            self._torch = torch
            gen = torch.Generator().manual_seed(0)
            self._tensors = (torch.randn(PROBE_SIZE, PROBE_SIZE, generator=gen),
                             torch.randn(PROBE_SIZE, PROBE_SIZE, generator=gen),
                             torch.empty(PROBE_SIZE, PROBE_SIZE))
        a, b, out = self._tensors
        set_enabled = self._torch._C._autograd._enable_record_function
        set_enabled(False)  # the profiler would record the probe's ops as the job's
        try:
            start = time.thread_time_ns()
            for _ in range(PROBE_REPEATS):
                self._torch.mm(a, b, out=out)
            cpu_ns = time.thread_time_ns() - start
        finally:
            set_enabled(True)
        self._next_ns = time.monotonic_ns() + int(max(cpu_ns, 1) / PROBE_SHARE)
        return cpu_ns
