"""The diagnosis benchmark end to end on a small subset: real CPU loops under `mlprof run`, judged by the advisor.

The full benchmark is ``python benchmarks/diagnosis.py`` (docs/diagnosis.md);
this runs four of its runs (six with MLPROF_LONG_TESTS=1) and checks the harness (commands, advice, judging,
table, score) and the cases whose rules exist today. Never a wall-clock time.
"""

from __future__ import annotations

import os
import sys
from dataclasses import replace
from pathlib import Path

import pytest

pytest.importorskip("torch")
HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[1] / "benchmarks"))

import diagnosis  # noqa: E402  (benchmarks/diagnosis.py)
from diagnosis_cases import ALARMS, CASES, Run, run_one, score, top_finding  # noqa: E402

pytestmark = pytest.mark.slow
# The suite's machine is shared. Another job taking its cores is true of the machine, not of the code: like
# the benchmark's busy_machine control, these runs are judged without cpu_contention. (With two busy loops on
# 2 cores it was critical at 0.3-0.8 of step time: it came before memory_churn and op_storm, and was the
# fixed twin's alarm, in 4 of 8 runs.)
MACHINE = ("cpu_contention",)
BY_NAME = {c.name: replace(c, environment=tuple(dict.fromkeys(c.environment + MACHINE))) for c in CASES}
# Bottlenecks of different classes the rules name today.
# (gc and data loading on real runs: tests/analysis/test_advisor_cpu_runs.py.)
# Two with MLPROF_LONG_TESTS=1 only (tests/conftest.py): each real run costs 20-40 s of CI's 20 minutes.
RIGHT_TODAY = ["memory_churn", "deepcopy_model"] + (["float64_model", "optimizer_loop"]
                                                     if os.environ.get("MLPROF_LONG_TESTS") else [])
# A twin whose built-in nn.Dropout leads a tiny MLP: no alarm, there is nothing to switch to. With
# MLPROF_LONG_TESTS=1 only since 2026-11-28 (CI's 20 minutes): the default suite's controls are
# tests/analysis/test_advisor_cpu_runs.py's (the same fixed dropout MLP, and a clean run); dominant_op on
# linalg: the full benchmark.
QUIET = [Run(BY_NAME["row_dropout"], fixed=True), Run(BY_NAME["deepcopy_model"], fixed=True)] \
    if os.environ.get("MLPROF_LONG_TESTS") else []
SUBSET = [Run(BY_NAME[n], fixed=False) for n in RIGHT_TODAY] + QUIET


# Session scope: the runs are made once even when the suite's workers interleave this file with others.
@pytest.fixture(scope="session")
def verdicts(tmp_path_factory):
    work = tmp_path_factory.mktemp("diagnosis")
    mp = pytest.MonkeyPatch()
    mp.setenv("MLPROF_LOCK_DIR", str(work / "locks"))
    try:
        return {v.run.label: v for v in (judged_run(r, work) for r in SUBSET)}
    finally:
        mp.undo()


def top_about_the_code(v):
    return top_finding([f for f in v.findings if f.get("id") not in v.run.case.environment])


def judged_right(v) -> bool:
    if v.run.judged_on_alarms:
        return not v.false_alarm
    top = top_about_the_code(v)
    return bool(v.ok and top and top["severity"] in ALARMS and top["id"] in v.run.case.expected)


def judged_run(run: Run, work: Path, attempts: int = 3):
    """One run, made again (at most twice) when it was judged wrong while the machine was measured busy.

    On a busy machine the steps' wait for a core lands in whichever phase was running: a tiny twin's
    Python glue became a critical host_outside_ops (0.57 of step time), op_storm fell below critical. A
    run judged wrong on a machine that was not measured busy, or on the last attempt, stands.
    """
    for attempt in range(attempts):
        v = run_one(run, work / f"attempt{attempt}", timeout_s=300)
        busy = any(f.get("id") in MACHINE for f in v.findings)
        if not (v.ok and busy) or judged_right(v):
            return v
    return v


def test_every_run_is_profiled_and_advised(verdicts):
    assert len(verdicts) == len(SUBSET) <= 6
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
    rules = diagnosis.rule_table(ordered)
    assert rules[0].split() == ["rule", "cases", "right", "recall", "warned", "correct", "precision"]
    assert {line.split()[0] for line in rules[2:]} >= {BY_NAME[n].expected[0] for n in RIGHT_TODAY}


def test_a_deep_copy_of_the_model_every_step_is_named_with_its_line_and_callee(verdicts):
    v = verdicts["deepcopy_model"]
    (f,) = [f for f in v.findings if f["id"] == "side_work"]
    assert "update_ema" in f["title"] and "copy.deepcopy" in f["title"], f["title"]
    m = f["evidence"]["metrics"]
    assert m["python_ns"] > 0 and m["ops_ns"] > 0, "the copy's Python and its tensor copies are one cost"


@pytest.mark.parametrize("name", RIGHT_TODAY)
def test_bottleneck_top_finding_names_the_cause(verdicts, name):
    v = verdicts[name]
    assert judged_right(v), f"top finding {top_about_the_code(v)} not in {v.run.case.expected}"


@pytest.mark.parametrize("label", [r.label for r in QUIET])
def test_fixed_twin_and_clean_control_raise_no_alarm(verdicts, label):
    v = verdicts[label]
    assert not v.false_alarm, [(f["id"], f["severity"], f.get("title")) for f in v.alarms]
