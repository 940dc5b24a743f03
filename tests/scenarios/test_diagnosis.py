"""The diagnosis benchmark end to end on a small subset: real CPU loops under `mlprof run`, judged by the advisor.

The full benchmark is ``python benchmarks/diagnosis.py`` (docs/diagnosis.md);
this runs four of its runs and checks the harness (commands, advice, judging,
table, score) and the cases whose rules exist today. Never a wall-clock time.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[1] / "benchmarks"))

import diagnosis  # noqa: E402  (benchmarks/diagnosis.py)
from diagnosis_cases import CASES, Run, run_one, score  # noqa: E402

pytestmark = pytest.mark.slow
BY_NAME = {c.name: c for c in CASES}
# Bottlenecks of different classes the rules name today.
# (gc and data loading on real runs: tests/analysis/test_advisor_cpu_runs.py.)
RIGHT_TODAY = ["float64_model", "memory_churn", "optimizer_loop"]
# A twin whose built-in nn.Dropout leads a tiny MLP: no alarm, there is nothing to switch to. (Clean
# controls: tests/analysis/test_advisor_cpu_runs.py; dominant_op on linalg: the full benchmark.)
QUIET = [Run(BY_NAME["row_dropout"], fixed=True)]
SUBSET = [Run(BY_NAME[n], fixed=False) for n in RIGHT_TODAY] + QUIET


# Session scope: the runs are made once even when the suite's workers interleave this file with others.
@pytest.fixture(scope="session")
def verdicts(tmp_path_factory):
    work = tmp_path_factory.mktemp("diagnosis")
    mp = pytest.MonkeyPatch()
    mp.setenv("MLPROF_LOCK_DIR", str(work / "locks"))
    try:
        return {v.run.label: v for v in (run_one(r, work, timeout_s=300) for r in SUBSET)}
    finally:
        mp.undo()


def test_every_run_is_profiled_and_advised(verdicts):
    assert len(verdicts) == len(SUBSET) <= 4
    for v in verdicts.values():
        assert v.ok, f"{v.run.label}: {v.error}"
        assert v.mean_step_ms is not None and v.mean_step_ms > 0
        assert v.findings is not None


def test_the_table_has_one_row_per_run_and_a_score(verdicts):
    ordered = list(verdicts.values())
    lines = diagnosis.table(ordered)
    assert lines[0].split() == ["run", "expected", "top", "finding", "judged", "step", "ms"]
    assert len(lines) == 2 + len(ordered)
    assert [line.split()[0] for line in lines[2:]] == [v.run.label for v in ordered]
    s = score(ordered)
    assert s["bottlenecks"] == len(RIGHT_TODAY) and s["clean_runs"] == len(QUIET)
    assert s["right"] + s["wrong_top"] + s["silent_misses"] == s["bottlenecks"]
    assert 0 <= s["recall"] <= 1
    assert any(line.startswith("precision ") for line in diagnosis.summary(ordered))


@pytest.mark.parametrize("name", RIGHT_TODAY)
def test_bottleneck_top_finding_names_the_cause(verdicts, name):
    v = verdicts[name]
    assert v.right, f"top finding {v.top} not in {v.run.case.expected}"


@pytest.mark.parametrize("label", [r.label for r in QUIET])
def test_fixed_twin_and_clean_control_raise_no_alarm(verdicts, label):
    v = verdicts[label]
    assert not v.false_alarm, [(f["id"], f["severity"], f.get("title")) for f in v.alarms]
