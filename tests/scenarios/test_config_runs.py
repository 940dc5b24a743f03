"""Anomaly detection left on, on a real CPU training loop under `mlprof run`: recorded at capture time, charged
its measured cost, and the top finding about the code (its fixed twin: none of it).

Judges shares of step time, so it runs alone (tests/conftest.py QUIET_FILES). Never a wall-clock time.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))

from diagnosis_cases import ALARMS, CASES, Run, run_one, top_finding  # noqa: E402

pytestmark = pytest.mark.slow
# Another job taking the shared machine's cores is true of the machine, not of the code (test_diagnosis.py).
MACHINE = ("cpu_contention",)
CASE = next(c for c in CASES if c.name == "anomaly_mlp")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    work = tmp_path_factory.mktemp("config_runs")
    out = {}
    for fixed in (False, True):
        run = Run(CASE, fixed=fixed)
        verdict = run_one(run, work, timeout_s=300)
        assert verdict.ok, f"{run.label}: {verdict.error}"
        (meta,) = [json.loads(p.read_text()) for p in (work / run.label / "result").glob("*/profiler_metadata.json")]
        out[fixed] = (verdict, meta)
    return out


def test_the_capture_records_anomaly_mode(runs):
    for fixed, (_, meta) in runs.items():
        (window,) = meta["torch_state"]
        assert window["at_start"]["anomaly_enabled"] is (not fixed)
        assert window["at_start"]["grad_enabled"] is True and window["changed"] == {}


def test_anomaly_mode_is_the_top_finding_with_its_measured_cost(runs):
    verdict, _ = runs[False]
    findings = [f for f in verdict.findings if f["id"] not in MACHINE]
    top = top_finding(findings)
    assert top["id"] == "anomaly_detection" and top["severity"] in ALARMS, top
    m = top["evidence"]["metrics"]
    # mlp(256, depth=4): 5 linears (aten::t and aten::addmm each a node), 4 ReLUs, log_softmax, nll_loss.
    # A mean over the window's steps: a step cut at the window's end can miss a node (15.9 in CI).
    assert m["nodes_per_step"] == pytest.approx(16, abs=0.5)
    assert m["traceback_ns"] > 0 and m["nan_check_ns"] > 0 and m["check_nan"] is True
    assert top["impact_ns"] == m["traceback_ns"] + m["nan_check_ns"]
    # The inflated ops are anomaly detection's, not a loop to vectorise or an op to replace.
    assert not [f["id"] for f in findings if f["severity"] in ALARMS
                and f["id"] in ("op_storm", "dominant_op", "dominant_module")]


def test_the_fixed_twin_has_no_config_finding(runs):
    verdict, _ = runs[True]
    ids = {f["id"] for f in verdict.findings}
    assert "anomaly_detection" not in ids
    assert not [f for f in verdict.findings if f["severity"] in ALARMS and f["id"] not in MACHINE]
