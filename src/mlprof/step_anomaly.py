"""What makes a step anomalous against its job's baseline: one definition for monitor mode's triggers
(``mlprof.collect.monitor_triggers``, at run time) and the advisor's periodic stalls (``analysis/monitor.py``).

A step's *work* is its wall time minus its wait for a core (run-queue delay): another process holding the
cores is the machine's doing, not the job's. The kernel may update that wait only at its scheduler tick
(4 ms on the 2-core VM this was built on: per-step waits read 0, 3.99, 8.0 ms), so a step that waited at
all must clear the threshold by ``WAIT_RESOLUTION_NS`` more. The threshold is the baseline's median plus
the largest of ``MAD_MULTIPLE`` robust spreads (1.4826 x MAD), ``MIN_EXCESS_FRACTION`` of the median and
``MIN_EXCESS_NS``. Pure arithmetic: no numpy, no torch.
"""

from __future__ import annotations

__all__ = ["MAD_MULTIPLE", "MIN_EXCESS_FRACTION", "MIN_EXCESS_NS", "WAIT_RESOLUTION_NS", "work_ns",
           "anomaly_threshold_ns", "is_anomalous"]

MAD_MULTIPLE = 5.0
MIN_EXCESS_FRACTION = 0.5
MIN_EXCESS_NS = 500_000
WAIT_RESOLUTION_NS = 4_000_000


def work_ns(wall_ns: int, wait_ns: int | None) -> int:
    """The step's wall time less its wait for a core (an unmeasured wait counts 0)."""
    return max(wall_ns - max(wait_ns or 0, 0), 0)


def anomaly_threshold_ns(median_ns: float, mad_ns: float) -> float:
    return median_ns + max(MAD_MULTIPLE * 1.4826 * mad_ns, MIN_EXCESS_FRACTION * median_ns, MIN_EXCESS_NS)


def is_anomalous(work: int, waited: bool, threshold_ns: float) -> bool:
    """Whether a step of ``work`` ns (:func:`work_ns`) is anomalous; ``waited``: it waited for a core at all."""
    return work - (WAIT_RESOLUTION_NS if waited else 0) > threshold_ns
