"""The diagnosis benchmark's judging, on made-up verdicts: per-rule recall over each class's cases and
precision over every warning a rule raised (twins' and controls' warnings are false)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))

from diagnosis_cases import Case, Run, Verdict, per_rule  # noqa: E402

GC = Case("gc_like", ("gc_pauses",), "a GC storm")
HOST = Case("host_like", ("host_outside_ops", "side_work"), "Python between steps")
CLEAN = Case("clean", (), "healthy", environment=("cpu_contention",))


def _v(case, fixed, *findings):
    return Verdict(Run(case, fixed), ok=True,
                   findings=[{"id": i, "severity": sev, "share": share} for i, sev, share in findings])


def test_recall_per_class_and_precision_per_rule():
    verdicts = [
        _v(GC, False, ("gc_pauses", "critical", 0.9)),  # right
        _v(GC, True, ("dominant_op", "info", 0.3)),  # quiet twin
        _v(HOST, False, ("side_work", "warning", 0.3), ("dominant_op", "warning", 0.2)),  # right, via side_work
        _v(HOST, True, ("side_work", "warning", 0.26)),  # a false alarm of side_work
        _v(CLEAN, False, ("cpu_contention", "critical", 0.5), ("dominant_op", "warning", 0.4)),
    ]
    rows = {r["rule"]: r for r in per_rule(verdicts)}
    assert rows["gc_pauses"]["recall"] == 1.0 and rows["gc_pauses"]["precision"] == 1.0
    # host_like's class is its first id; its right answer came from side_work, which also warned on the twin.
    assert rows["host_outside_ops"]["cases"] == 1 and rows["host_outside_ops"]["recall"] == 1.0
    assert rows["host_outside_ops"]["warned"] == 0 and rows["host_outside_ops"]["precision"] is None
    assert rows["side_work"]["warned"] == 2 and rows["side_work"]["correct"] == 1
    assert rows["side_work"]["precision"] == pytest.approx(0.5)
    # dominant_op warned on the host bottleneck (not among its ids) and on the clean control: 0 of 2.
    assert rows["dominant_op"]["warned"] == 2 and rows["dominant_op"]["precision"] == 0.0
    # cpu_contention is true of the control's machine: not a warning about its code.
    assert "cpu_contention" not in rows
