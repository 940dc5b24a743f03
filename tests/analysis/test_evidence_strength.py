"""The advisor says when its evidence is thin: few steps, few stack samples, a call site named from a handful."""

from __future__ import annotations

from mlprof.analysis.advisor.engine import advise
from mlprof.analysis.advisor.evidence_strength import CALL_SITE_MIN_SAMPLES, mark_thin_call_sites
from mlprof.analysis.advisor.model import Evidence, Finding
from test_compare_stats import MS, _parsed, _trace


def _finding(samples: list[int]) -> Finding:
    sites = [{"call_site": f"train.py:{10 + i}", "samples": n, "self_ns": 1000} for i, n in enumerate(samples)]
    return Finding("host_outside_ops", "Python between ops: 40% of step time", "warning", 0.4, 10,
                   Evidence(call_sites=sites), "fix it")


def test_a_call_site_named_from_a_handful_of_samples_says_so():
    thin, solid = _finding([3, 1]), _finding([CALL_SITE_MIN_SAMPLES, 2])
    mark_thin_call_sites([thin, solid])
    assert thin.title.endswith("(3 samples: call site uncertain)")
    assert thin.evidence.metrics["call_site_note"] == "3 samples: call site uncertain"
    assert all(site["uncertain"] for site in thin.evidence.call_sites)
    # A well-sampled top site keeps its title; a thin runner-up is still marked.
    assert "uncertain" not in solid.title and "call_site_note" not in solid.evidence.metrics
    assert "uncertain" not in solid.evidence.call_sites[0] and solid.evidence.call_sites[1]["uncertain"]
    mark_thin_call_sites([thin])  # idempotent
    assert thin.title.count("call site uncertain") == 1


def test_findings_without_sampled_sites_are_left_alone():
    plain = Finding("gc_pauses", "GC", "info", 0.05, 1, Evidence(call_sites=[{"call_site": "a.py:1"}]), "fix")
    mark_thin_call_sites([plain])
    assert plain.title == "GC"


def test_a_report_on_few_steps_says_so(tmp_path):
    with _parsed(_trace(tmp_path / "three" / "t.json", [(1 * MS, 20 * MS)] * 3)) as three:
        notes = advise(three).notes
    assert any("only 3 step(s) recorded" in n and "cannot give a verdict on fewer than 5" in n for n in notes)
    with _parsed(_trace(tmp_path / "twelve" / "t.json", [(1 * MS, 20 * MS)] * 12)) as twelve:
        notes = advise(twelve).notes
    assert any("only 12 step(s) recorded" in n and "verdict" not in n for n in notes)
    with _parsed(_trace(tmp_path / "many" / "t.json", [(1 * MS, 20 * MS)] * 25)) as many:
        assert not [n for n in advise(many).notes if "step(s) recorded" in n]
    # A plain trace was not sampled: no word about samples.
        assert not [n for n in advise(many).notes if "stack sampler" in n]
