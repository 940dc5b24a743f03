"""The advisor: rules over one parsed output returning structured findings.

``advise(store)`` runs :data:`RULES`; each rule is a plain function
``rule(ctx, thresholds) -> list[Finding]`` so a caller can pass its own list.
Severity comes from the finding's cost as a share of total step time, judged
against the named :class:`Thresholds`.
"""

from mlprof.analysis.advisor.context import AdvisorContext
from mlprof.analysis.advisor.engine import (
    RULES,
    AdvisorReport,
    Rule,
    RankAdvice,
    advise,
    advise_jobs,
    rank_advice,
    sort_findings,
)
from mlprof.analysis.advisor.model import SEVERITIES, Evidence, Finding, Thresholds, severity_for
from mlprof.analysis.advisor.rules_cluster import slow_rank_findings

__all__ = ["advise", "rank_advice", "advise_jobs", "RankAdvice", "AdvisorReport", "AdvisorContext", "Finding", "Evidence", "Thresholds", "Rule", "RULES",
           "SEVERITIES", "severity_for", "sort_findings", "slow_rank_findings"]
