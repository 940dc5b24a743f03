"""Running the rules: each is ``rule(ctx, thresholds) -> list[Finding]``, composed in a list."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from mlprof.analysis.advisor.context import AdvisorContext
from mlprof.analysis.advisor.evidence_strength import mark_thin_call_sites, window_notes
from mlprof.analysis.advisor.explained import Explained, explain
from mlprof.analysis.advisor.leads import apply_leads, slow_rank_leads
from mlprof.analysis.advisor.model import SEVERITIES, Finding, Thresholds
from mlprof.analysis.advisor.rules_comm import communication_overlap, exposed_by_step, split_waiting
from mlprof.analysis.advisor.rules_device import device_idle, memory_churn, synchronization
from mlprof.analysis.advisor.rules_env import cpu_oversubscription, recompilation
from mlprof.analysis.advisor.rules_config import (
    anomaly_detection,
    backend_settings,
    debug_environment,
    defer_to_anomaly,
    grad_without_backward,
    launch_blocking,
)
from mlprof.analysis.advisor.rules_shapes import dynamic_shapes
from mlprof.analysis.advisor.rules_host import (
    data_loading,
    dominant_op,
    gc_pauses,
    host_outside_ops,
)
from mlprof.analysis.advisor.rules_outliers import step_outliers
from mlprof.analysis.advisor.rules_modules import dominant_module
from mlprof.analysis.advisor.rules_alloc import fresh_tensors
from mlprof.analysis.advisor.rules_contention import cpu_contention
from mlprof.analysis.advisor.rules_dtype import slow_dtype
from mlprof.analysis.advisor.rules_storm import op_storm
from mlprof.analysis.advisor.rules_monitor import monitor_windows, periodic_stalls
from mlprof.analysis.advisor.rules_growth import memory_growth, work_growth
from mlprof.analysis.advisor.rules_side_work import side_work
from mlprof.analysis.advisor.rules_npu import ai_cpu_ops, npu_op_compile, npu_wording
from mlprof.analysis.advisor.whole_trace import whole_trace_store
from mlprof.tables.store import TableStore

if TYPE_CHECKING:
    from mlprof.analysis.jobs import RunIdentity

__all__ = ["Rule", "RULES", "AdvisorReport", "RankAdvice", "advise", "rank_advice", "advise_jobs", "sort_findings"]

Rule = Callable[[AdvisorContext, Thresholds], list[Finding]]

# Every rule, in reporting order for equal severity and share.
RULES: tuple[Rule, ...] = (
    memory_growth, work_growth,
    op_storm, slow_dtype, fresh_tensors, dominant_op, dominant_module, data_loading, gc_pauses, host_outside_ops, side_work, device_idle, synchronization,
    communication_overlap, memory_churn, recompilation, dynamic_shapes, step_outliers, cpu_oversubscription,
    cpu_contention,
    ai_cpu_ops, npu_op_compile,
    anomaly_detection, launch_blocking, debug_environment, backend_settings, grad_without_backward,
    periodic_stalls, monitor_windows,
)


@dataclass
class AdvisorReport:
    """Findings of one parsed output, most severe and costly first."""

    rank: int | None
    step_count: int
    total_step_ns: int
    findings: list[Finding] = field(default_factory=list)
    rules_run: list[str] = field(default_factory=list)
    source: str | None = None  # the capture or trace, when known
    # True when the trace had no steps and each capture window was judged as one step.
    whole_trace: bool = False
    # Things the reader should know that are not findings (e.g. a rank seen twice in one job).
    notes: list[str] = field(default_factory=list)
    # How much of the step time the warnings explain, counted once (None without steps).
    explained: Explained | None = None
    steps: list = field(default_factory=list, repr=False)  # the StepBreakdowns judged

    def recount(self) -> None:
        """Sort the findings and count what they explain again (after findings were added or re-rated)."""
        self.findings = sort_findings(self.findings)
        self.explained = explain(self.findings, self.steps, self.total_step_ns)

    @property
    def warnings(self) -> list[Finding]:
        return [f for f in self.findings if f.severity in ("critical", "warning")]

    def to_dict(self) -> dict:
        return {"source": self.source, "rank": self.rank, "whole_trace": self.whole_trace,
                "step_count": self.step_count, "total_step_ns": self.total_step_ns,
                "rules_run": self.rules_run, "notes": self.notes,
                "explained": self.explained.to_dict() if self.explained else None,
                "findings": [f.to_dict() for f in self.findings]}


def sort_findings(findings: list[Finding]) -> list[Finding]:
    return sorted(findings, key=lambda f: (SEVERITIES.index(f.severity), -f.share, -f.impact_ns))


def advise(store: TableStore, thresholds: Thresholds | None = None,
           rules: Sequence[Rule] = RULES) -> AdvisorReport:
    """Run ``rules`` over one parsed output and return their findings.

    A trace without steps is judged as one step per capture window (see
    :mod:`mlprof.analysis.advisor.whole_trace`); the report says so.
    """
    th = thresholds or Thresholds()
    ctx = AdvisorContext(store)
    if not ctx.steps:
        whole = whole_trace_store(store)
        if whole is not None:
            try:
                report = advise(whole, th, rules)
            finally:
                whole.close()
            report.whole_trace = True
            return report
    findings: list[Finding] = []
    for rule in rules:
        findings.extend(rule(ctx, th))
    findings = defer_to_anomaly(ctx, findings)
    findings = apply_leads(findings)
    findings = npu_wording(ctx, findings)
    mark_thin_call_sites(findings)
    report = AdvisorReport(rank=ctx.rank, step_count=len(ctx.steps), total_step_ns=ctx.total_step_ns,
                           findings=findings, rules_run=[r.__name__ for r in rules], steps=list(ctx.steps))
    report.notes.extend(window_notes(ctx))
    note = profiling_cost_note(ctx.metadata.get("capture.step_times"),
                               max((s.step for s in ctx.steps if s.step is not None), default=None))
    if note:
        report.notes.append(note)
    report.recount()
    return report


# Profiled steps this much slower than unprofiled ones are worth a sentence.
PROFILING_COST_NOTE = 0.10


def profiling_cost_note(step_times: object, last_profiled_step: int | None = None) -> str | None:
    """How much slower the profiled steps ran than warm unprofiled ones (collect.step_times), when it matters.

    Every recorded op costs the profiler a little, so findings about many tiny ops (op_storm,
    host-bound loops) carry that cost in their share. Only unprofiled steps before the last profiled
    one compare like with like; captures written before the collector kept to them counted the steps
    after the window too (a trainer's thousands of later, warmer steps): more unprofiled steps than
    there are steps up to ``last_profiled_step`` give that away, and the note stays silent.
    """
    if not isinstance(step_times, dict):
        return None
    try:
        profiled, unprofiled = int(step_times["profiled_median_ns"]), int(step_times["unprofiled_median_ns"])
        counts = int(step_times["profiled_steps"]), int(step_times["unprofiled_steps"])
    except (KeyError, TypeError, ValueError):
        return None
    if unprofiled <= 0 or profiled < (1 + PROFILING_COST_NOTE) * unprofiled:
        return None
    if last_profiled_step is not None and counts[1] > last_profiled_step + 1:
        return None
    return (f"profiling made steps {profiled / unprofiled - 1:.0%} slower (median {profiled / 1e6:.1f} ms over "
            f"{counts[0]} profiled steps, {unprofiled / 1e6:.1f} ms over {counts[1]} warm unprofiled ones before "
            "them): "
            "shares include the profiler's cost per recorded op, most in findings about many tiny ops")



@dataclass
class RankAdvice:
    """One output's report, with what judging it among the ranks of its job needs of its tables."""

    report: AdvisorReport
    identity: RunIdentity
    exposed: dict[int, int] | None  # exposed communication per step, when it is a finding
    extracted: dict | None  # its share of a cluster analysis (extract_rank), when it may be in a job


def rank_advice(store: TableStore, source: str, output_dir: Path | None = None,
                thresholds: Thresholds | None = None, in_job: bool = True) -> RankAdvice:
    """:func:`advise` of one output, with its identity and (``in_job``) its cluster share, for :func:`advise_jobs`."""
    from mlprof.analysis.cluster_data import extract_rank
    from mlprof.analysis.jobs import run_identity

    report = advise(store, thresholds)
    report.source = str(source)
    exposed = (exposed_by_step(AdvisorContext(store))
               if any(f.id == "communication_overlap" for f in report.findings) else None)
    return RankAdvice(report, run_identity(store, str(source)), exposed,
                      extract_rank(store, str(source), output_dir) if in_job else None)


def advise_jobs(ranks: Sequence[RankAdvice], thresholds: Thresholds | None = None) -> list[AdvisorReport]:
    """The reports of ``ranks``; among the ranks of one job (:mod:`mlprof.analysis.jobs`), the slow-rank
    finding is added to the slow rank's report and waiting in collectives is split from transfer."""
    from mlprof.analysis.advisor.rules_cluster import slow_rank_findings
    from mlprof.analysis.cluster import combine
    from mlprof.analysis.jobs import group_jobs

    th = thresholds or Thresholds()
    reports = [r.report for r in ranks]
    exposed = {r.report.source: r.exposed for r in ranks if r.exposed is not None}
    extracted = {r.report.source: r.extracted for r in ranks}
    grouping = group_jobs([r.identity for r in ranks])
    by_source = {r.source: r for r in reports}
    for job in grouping.jobs:
        if len(job) < 2 or any(extracted[m.source] is None for m in job):
            continue
        cluster = combine([extracted[m.source] for m in job], th)
        slow = slow_rank_findings(cluster)
        for finding in slow:
            # Matched by source: ranks of bare traces may all be None.
            report = by_source.get(finding.evidence.metrics["source"])
            if report is not None:
                report.findings = slow_rank_leads(report.findings, finding)
                report.findings.append(finding)
        _split_communication_waiting(job, by_source, exposed, slow, th)
        for member in job:
            by_source[member.source].recount()
    for report in reports:
        report.notes.extend(grouping.warnings)
    return reports


def _split_communication_waiting(job, by_source: dict, exposed: dict, slow: list[Finding], th: Thresholds) -> None:
    """Among the ranks of one job, each rank's exposed communication beyond the least-exposed rank's
    (per step) is waiting for others, owned by the slow rank when there is one."""
    ranks_of = {m.source: m for m in job}
    for member in job:
        report = by_source[member.source]
        own = exposed.get(member.source)
        if own is None:
            continue
        # A rank without exposed communication worth a finding waited about nothing.
        others = [exposed[o] if o in exposed else dict.fromkeys(own, 0) for o in ranks_of if o != member.source]
        late = sorted({str(f.rank) for f in slow if f.evidence.metrics["source"] != member.source})
        for finding in report.findings:
            if finding.id == "communication_overlap":
                split_waiting(finding, own, others, report.total_step_ns, th, late)
