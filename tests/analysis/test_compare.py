"""Compare: the fix of seed 002's dropout shows as a large, correctly signed improvement."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from mlprof.analysis.advisor import advise
from mlprof.analysis.compare import compare
from mlprof.cli.exit_codes import EXIT_SLOWER
from mlprof.tables.store import TableStore

pytestmark = pytest.mark.torch


def _module_ns_per_step(out, word):
    with TableStore(out / "tables") as store:
        report = advise(store)
        # The dropout module's forward time, as the advisor measured it (0 when below every threshold).
        found = [f for f in report.findings if f.id == "dominant_module" and word in f.evidence.metrics["module"]]
        return (found[0].impact_ns if found else 0) / report.step_count


def test_compare_slow_vs_fixed_reports_the_improvement_with_sign_and_size(runs):
    slow, fixed = runs("seed002_slow"), runs("seed002_fixed")
    with TableStore(slow / "tables") as b, TableStore(fixed / "tables") as n:
        c = compare(b, n)
        base_steps = b.rows("SELECT avg(dur_ns) FROM steps")[0][0]
        new_steps = n.rows("SELECT avg(dur_ns) FROM steps")[0][0]
    assert c.aligned_by == "step number" and c.steps == 30
    # Beyond noise, and the same set-up on both sides (real captures carry the facts compared). Where the
    # training thread waited for a core (2% of its steps or more: any other job on the machine), compare
    # rightly adds the one warning saying so ("...; wall time says ..."): the set-up must still not differ.
    assert c.verdict.verdict == "faster" and c.verdict.high_pct < 0
    assert [w for w in c.warnings if "; wall time says " not in w] == []
    assert c.facts["base"]["profiler_level"] == c.facts["new"]["profiler_level"]
    assert "aten::linear" in c.facts["base"]["batch_shape"]
    assert c.step_time.delta_ns < 0 and c.speedup > 2
    assert c.step_time.base_ns == pytest.approx(base_steps) and c.step_time.new_ns == pytest.approx(new_steps)
    # Size: the step got faster by about what the slow dropout module cost per step.
    dropout_ns = _module_ns_per_step(slow, "SortDropout")
    assert dropout_ns > 0
    assert -c.step_time.delta_ns == pytest.approx(dropout_ns, rel=0.25)
    # Ranked by impact: the sort that made dropout slow is the top op type, gone entirely.
    assert c.op_types[0].name == "aten::sort" and c.op_types[0].new_ns == 0 and c.op_types[0].delta_pct == -100
    assert c.breakdown[0].name == "forward" and c.breakdown[0].delta_ns < 0
    # The breakdown's deltas add up to the step delta (host classes partition the step).
    host = [d for d in c.breakdown if d.detail.get("view") == "host"]
    assert sum(d.delta_ns for d in host) == pytest.approx(c.step_time.delta_ns, rel=1e-6)
    assert c.memory and all(m.base_ns > 0 for m in c.memory)  # profile_memory was on


def test_reversed_comparison_mirrors_the_first(runs):
    slow, fixed = runs("seed002_slow"), runs("seed002_fixed")
    with TableStore(slow / "tables") as b, TableStore(fixed / "tables") as n:
        forward, backward = compare(b, n), compare(n, b)
    assert backward.step_time.delta_ns == pytest.approx(-forward.step_time.delta_ns)
    assert backward.slower_than(100) and not forward.slower_than(0)


def test_compare_cli_fail_if_slower_exit_code(runs):
    slow, fixed = runs("seed002_slow").parent, runs("seed002_fixed").parent
    ok = subprocess.run([sys.executable, "-m", "mlprof", "compare", str(slow), str(fixed), "--fail-if-slower", "5"],
                        capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0, ok.stderr
    assert "faster" in ok.stdout and "aten::sort" in ok.stdout
    bad = subprocess.run([sys.executable, "-m", "mlprof", "compare", str(fixed), str(slow), "--fail-if-slower", "5",
                          "--json"], capture_output=True, text=True, timeout=120)
    assert bad.returncode == EXIT_SLOWER
    data = json.loads(bad.stdout)
    assert data["failed"] is True and data["step_time"]["delta_ns"] > 0
    assert "slower" in bad.stderr and "Traceback" not in bad.stderr


def test_compare_cli_missing_input_is_one_line(tmp_path):
    res = subprocess.run([sys.executable, "-m", "mlprof", "compare", str(tmp_path / "nope"), str(tmp_path)],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode != 0 and res.stderr.count("\n") == 1 and "Traceback" not in res.stderr
