"""On a slow rank, the finding about the line that makes it slow gives the lead to the slow-rank finding."""

from __future__ import annotations

from mlprof.analysis.advisor.engine import sort_findings
from mlprof.analysis.advisor.leads import slow_rank_leads as _slow_rank_leads
from mlprof.analysis.advisor.model import Evidence, Finding

SITE = "/job/train.py:340 shard"


def _finding(id_: str, severity: str, share: float, site: str | None = None, **metrics) -> Finding:
    return Finding(id=id_, title=f"{id_} title", severity=severity, share=share, impact_ns=int(share * 1e9),
                   evidence=Evidence(metrics=metrics, call_sites=[{"call_site": site}] if site else []),
                   fix="fix", rank=1)


def test_the_slow_rank_s_own_cause_becomes_its_detail():
    side = _finding("side_work", "warning", 0.21, SITE)
    other = _finding("dominant_op", "warning", 0.15, "/job/train.py:12 forward")
    slow = _finding("slow_rank", "warning", 0.19, call_site=SITE)
    findings = _slow_rank_leads([side, other], slow) + [slow]
    by_id = {f.id: f for f in findings}
    assert by_id["side_work"].severity == "info"
    assert "what makes rank 1 the slow rank" in by_id["side_work"].title
    assert by_id["dominant_op"].severity == "warning"  # another line: its own finding
    assert sort_findings(findings)[0].id == "slow_rank"


def test_the_slow_rank_takes_the_higher_severity():
    side = _finding("side_work", "critical", 0.45, SITE)
    slow = _finding("slow_rank", "warning", 0.30, call_site=SITE)
    findings = _slow_rank_leads([side], slow) + [slow]
    assert [f.id for f in sort_findings(findings)][0] == "slow_rank"
    assert slow.severity == "critical" and findings[0].severity == "info"


def test_without_a_cause_line_nothing_changes():
    side = _finding("side_work", "warning", 0.21, SITE)
    slow = _finding("slow_rank", "warning", 0.19, call_site=None)
    assert _slow_rank_leads([side], slow)[0].severity == "warning"
