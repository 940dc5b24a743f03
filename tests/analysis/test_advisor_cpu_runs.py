"""The advisor on real CPU training runs: it names the culprit, and stays quiet on a clean run."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from mlprof.analysis.advisor import Thresholds, advise
from mlprof.analysis.steps import step_breakdown
from mlprof.tables.store import TableStore

from machine_findings import about_the_machine

pytestmark = pytest.mark.torch


def _report(out):
    with TableStore(out / "tables") as store:
        return advise(store), step_breakdown(store)


def _by_id(report, rule_id):
    return [f for f in report.findings if f.id == rule_id]


def test_seed002_hand_written_dropout_is_named_as_the_bottleneck(runs):
    report, steps = _report(runs("seed002_slow"))
    top = report.findings[0]
    assert top.severity == "critical"
    # The module holding the slow dropout, and its slowest op, both come first.
    modules = _by_id(report, "dominant_module")
    assert modules and "SortDropout" in modules[0].evidence.metrics["module"]
    (op,) = [f for f in _by_id(report, "dominant_op") if f.evidence.metrics["op"] == "aten::sort"]
    assert op.severity in ("critical", "warning")
    assert any("SortDropout" in (s["module"] or "") and "forward" in (s["call_site"] or "")
               for s in op.evidence.call_sites)
    # Numbers are the tables' numbers: the share is of the summed step time.
    total = sum(s.dur_ns for s in steps)
    assert report.total_step_ns == total
    assert op.share == pytest.approx(op.impact_ns / total, abs=1e-4)
    assert op.share > 0.4  # sorting 16 random numbers per element dwarfs a small MLP
    # The slow path is visible: the sort ran on float64 random numbers, one shape.
    assert op.evidence.metrics["slow_dtype"] == "double" and "double" in op.title
    (shape,) = op.evidence.metrics["input_shapes"]
    assert shape["count"] == report.step_count


def test_fixed_version_gets_no_dominant_op_warning(runs):
    report, _ = _report(runs("seed002_fixed"))
    assert not [f for f in report.warnings if f.id in ("dominant_op", "dominant_module")]


def test_data_loading_bottleneck_is_flagged_with_the_worker_fix(runs):
    report, steps = _report(runs("data_loading"))
    (f,) = _by_id(report, "data_loading")
    assert f.severity in ("critical", "warning")
    assert f.impact_ns == sum(s.data_loading_ns for s in steps)
    assert f.evidence.metrics["single_process_loader"] is True
    assert "num_workers" in f.fix
    assert "pin_memory" not in f.fix, "pinned memory only helps device copies; this is a CPU-only run"
    assert report.findings[0].id == "data_loading"


def test_gc_pauses_are_flagged(runs):
    report, _ = _report(runs("gc"))
    (f,) = _by_id(report, "gc_pauses")
    assert f.severity in ("critical", "warning")
    with TableStore(runs("gc") / "tables") as store:
        in_steps = store.rows("SELECT sum(dur_ns) FROM gc_pauses WHERE step IS NOT NULL")[0][0]
    assert f.impact_ns == in_steps
    assert "gc.freeze" in f.fix


def test_clean_run_gets_no_warning(runs):
    report, _ = _report(runs("clean"))
    assert report.step_count == 10
    # Waiting for cores other processes held is the machine's (cpu_contention), not the code's; steps slow
    # only by that wait are step_outliers' info line (tests/analysis/test_step_outliers_wait.py).
    warnings = [f for f in report.warnings if not about_the_machine(f)]
    assert warnings == [], [(f.id, f.title) for f in warnings]


def test_thresholds_change_what_is_reported(runs):
    out = runs("seed002_slow")
    with TableStore(out / "tables") as store:
        strict = advise(store, Thresholds(dominant_op_warn_share=0.99, critical_share=1.0, info_share=0.99))
    assert not [f for f in strict.findings if f.id == "dominant_op"]


def test_advise_cli_prints_and_writes_advisor_json(runs):
    out = runs("seed002_slow")
    capture = out.parent
    text = subprocess.run([sys.executable, "-m", "mlprof", "advise", str(capture)], capture_output=True, text=True,
                          timeout=120)
    assert text.returncode == 0, text.stderr
    assert "[CRITICAL] dominant_module" in text.stdout and "aten::sort" in text.stdout and "fix:" in text.stdout
    written = json.loads((out / "advisor.json").read_text())
    res = subprocess.run([sys.executable, "-m", "mlprof", "advise", str(capture), "--json", "--no-write"],
                         capture_output=True, text=True, timeout=120)
    (printed,) = json.loads(res.stdout)
    assert [f["id"] for f in printed["findings"]] == [f["id"] for f in written["findings"]]
    assert {"id", "severity", "share", "impact_ns", "evidence", "fix", "title"} <= set(written["findings"][0])


def test_advise_cli_rejects_an_unknown_threshold_in_one_line(runs):
    res = subprocess.run([sys.executable, "-m", "mlprof", "advise", str(runs("clean")), "--threshold", "bogus=1"],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 2
    assert res.stderr.count("\n") == 1 and "bogus" in res.stderr and "Traceback" not in res.stderr
