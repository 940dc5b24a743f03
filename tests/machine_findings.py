"""What the advice on a real run says about its code, apart from what it says about the machine it shared.

The suite's real runs share a small machine with other jobs. Two findings can
then be true of the machine rather than of the code under test, and outrank
the finding a test expects (measured on a 2-core machine with two busy loops:
cpu_contention critical at 0.5-0.8 of step time ahead of op_storm and
memory_churn; a clean run's step_outliers warning when steps waited for a core):

* ``cpu_contention``: other processes took the job's cores while its threads
  waited for one;
* ``step_outliers`` whose slow steps are slow only by the wait for a core that
  mlprof measured in each step (``steps.cpu_wait_ns``): judged on each step's
  time less that wait, the rule would not warn.

Tests that judge the advisor on a real run judge the other findings, in the
advisor's own order. Nothing else is set aside: an outlier step that did not
wait for a core, or a run without measured waits, still counts.
"""

from __future__ import annotations

import statistics

from mlprof.analysis.advisor import Thresholds
from mlprof.tables.store import TableStore

__all__ = ["about_the_machine", "code_findings", "slow_only_by_waiting_for_a_core"]


def slow_only_by_waiting_for_a_core(store: TableStore, th: Thresholds | None = None) -> bool:
    """True when step_outliers would not warn on the steps' times less their measured wait for a core."""
    th = th or Thresholds()
    rows = store.rows("SELECT dur_ns, cpu_wait_ns FROM steps")
    if not rows or any(wait is None for _dur, wait in rows):
        return False  # no measured wait: nothing explains the slow steps
    ready = [dur - wait for dur, wait in rows]
    median = statistics.median(ready)
    slow = [r for r in ready if r > th.step_outlier_ratio * median]
    excess = sum(r - median for r in slow)
    return len(slow) < th.step_outlier_min_count or excess < th.step_outlier_warn_share * sum(ready)


def about_the_machine(finding, store: TableStore) -> bool:
    fid = finding.id if hasattr(finding, "id") else finding["id"]
    if fid == "cpu_contention":
        return True
    return fid == "step_outliers" and slow_only_by_waiting_for_a_core(store)


def code_findings(report, store: TableStore) -> list:
    """The report's findings, in its order, without those about the machine."""
    return [f for f in report.findings if not about_the_machine(f, store)]
