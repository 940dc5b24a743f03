"""What the advice on a real run says about its code, apart from what it says about the machine it shared.

The suite's real runs share a small machine with other jobs. ``cpu_contention``
(other processes took the job's cores while its threads waited for one) is then
true of the machine rather than of the code under test, and can outrank the
finding a test expects (measured on a 2-core machine with two busy loops:
critical at 0.5-0.8 of step time ahead of op_storm and memory_churn).

Steps slow only by their measured wait for a core are the advisor's own
business: ``step_outliers`` judges steps on their time less that wait and
makes such steps an info line (tests/analysis/test_step_outliers_wait.py).

Tests that judge the advisor on a real run judge the other findings, in the
advisor's own order. Nothing else is set aside.
"""

from __future__ import annotations

__all__ = ["about_the_machine", "code_findings"]


def about_the_machine(finding) -> bool:
    fid = finding.id if hasattr(finding, "id") else finding["id"]
    return fid == "cpu_contention"


def code_findings(report) -> list:
    """The report's findings, in its order, without those about the machine."""
    return [f for f in report.findings if not about_the_machine(f)]
