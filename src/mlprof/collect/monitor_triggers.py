"""When monitor mode opens a detailed window: anomalies against the job's running baseline.

Pure bookkeeping over numbers (no clock, no torch), fed one step at a time by
:class:`mlprof.collect.monitor.JobMonitor`. Only steps outside windows are
judged and enter the baseline (a profiled step is slower by design). What
makes a step anomalous (its work against the running median and MAD) is
:mod:`mlprof.step_anomaly`'s, shared with the advisor.

- ``slow_steps``: at least ``ANOMALIES`` anomalous steps among the last
  ``RECENT``, interleaved with normal steps (a stall that repeats).
  A window opened then records the steps that follow, so it catches a stall
  that repeats; a one-off stall is in the series only.
- ``throughput_drop``: the same excess on ``ANOMALIES`` steps in a row (a
  level shift), or the running median ``DROP_RATIO`` above the reference
  median taken when the detector was armed (a slow drift).
- ``memory_growth``: the job's RSS higher at each of ``GROWTH_CHECKS``
  checkpoints ``CHECK_EVERY`` steps apart, by ``MIN_GROWTH_BYTES`` in all.

The baseline (median and MAD of the last ``BASELINE_STEPS`` judged steps) is
refreshed every ``REFRESH_EVERY`` steps: a sort of 64 numbers every 16 steps
instead of one per step.
"""

from __future__ import annotations

import statistics
from collections import deque

from ..step_anomaly import anomaly_threshold_ns, is_anomalous, work_ns as step_work_ns

__all__ = ["Triggers"]

BASELINE_STEPS = 64
REFRESH_EVERY = 16
ARM_AFTER = 24  # judged steps before the first verdict
RECENT = 32
ANOMALIES = 3
DROP_RATIO = 1.3
CHECK_EVERY = 32
GROWTH_CHECKS = 5
MIN_GROWTH_BYTES = 16 << 20


class Triggers:
    def __init__(self) -> None:
        self._values: deque[int] = deque(maxlen=BASELINE_STEPS)
        self._recent: deque[tuple[int, bool]] = deque(maxlen=RECENT)  # (step, anomalous)
        self._judged = 0
        self.median_ns: float | None = None
        self.threshold_ns: float | None = None
        self.reference_ns: float | None = None
        self._rss_checks: list[int] = []
        self._rss_count = 0

    def observe(self, step: int, wall_ns: int, wait_ns: int, rss_bytes: int) -> tuple[str, str] | None:
        """One step outside every window (``wait_ns`` < 0: not measured): (reason, detail) when a window should
        open, else None."""
        found = self._memory(rss_bytes)
        work_ns = step_work_ns(wall_ns, wait_ns)
        self._values.append(work_ns)
        self._judged += 1
        if self._judged % REFRESH_EVERY == 0 and self._judged >= ARM_AFTER:
            self._refresh()
        threshold = self.threshold_ns
        if threshold is None:
            return found
        anomalous = is_anomalous(work_ns, wait_ns > 0, threshold)
        self._recent.append((step, anomalous))
        if found is not None:
            return found
        if anomalous:
            hits = [s for s, a in self._recent if a]
            if len(hits) >= ANOMALIES:
                last = list(self._recent)[-ANOMALIES:]
                in_a_row = all(a for _s, a in last)
                self._recent.clear()
                detail = (f"{len(hits)} of the last {RECENT} steps above {threshold / 1e6:.2f} ms "
                          f"(running median {self.median_ns / 1e6:.2f} ms); step {step}: {work_ns / 1e6:.2f} ms")
                return ("throughput_drop" if in_a_row else "slow_steps"), detail
        if (self.reference_ns and self.median_ns and self._judged % REFRESH_EVERY == 0
                and self.median_ns > DROP_RATIO * self.reference_ns):
            detail = (f"running median {self.median_ns / 1e6:.2f} ms, {self.median_ns / self.reference_ns:.2f}x "
                      f"the {self.reference_ns / 1e6:.2f} ms when the monitor was armed")
            self.reference_ns = self.median_ns  # a further drop triggers again, this one does not
            return "throughput_drop", detail
        return None

    def _refresh(self) -> None:
        values = sorted(self._values)
        median = statistics.median(values)
        mad = statistics.median(abs(v - median) for v in values)
        self.median_ns = median
        self.threshold_ns = anomaly_threshold_ns(median, mad)
        if self.reference_ns is None:
            self.reference_ns = median

    def _memory(self, rss_bytes: int) -> tuple[str, str] | None:
        if rss_bytes <= 0:
            return None
        self._rss_count += 1
        if self._rss_count % CHECK_EVERY:
            return None
        checks = self._rss_checks
        if checks and rss_bytes <= checks[-1]:
            checks.clear()
        checks.append(rss_bytes)
        if len(checks) >= GROWTH_CHECKS and checks[-1] - checks[0] >= MIN_GROWTH_BYTES:
            grown = checks[-1] - checks[0]
            steps = (len(checks) - 1) * CHECK_EVERY
            checks.clear()
            return "memory_growth", (f"RSS grew {grown / 2**20:.1f} MiB over {steps} steps outside windows, at "
                                     f"every one of {GROWTH_CHECKS} checkpoints")
        if len(checks) > GROWTH_CHECKS:
            del checks[0]
        return None

    def reset_after_window(self) -> None:
        """After a window: the anomalies before it are its cause, not the next one's."""
        self._recent.clear()
        self._rss_checks.clear()
