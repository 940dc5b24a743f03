"""One cause seen by two rules: one finding leads, the other becomes ``info`` and says where to look.

Left to the shares, two findings about the same cause traded the top place from run to run or between thread
counts (a periodic checkpoint: side_work's 27% at 1 thread, step_outliers' 36% at torch's default). Each rule
pair below names the cause the same way (a call site, a function, a phase); :func:`lead` is the one mechanism:
the follower becomes ``info`` with a pointer to the leader, and the leader takes the higher of the two
severities.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from mlprof.analysis.advisor.model import SEVERITIES, Finding

__all__ = ["lead", "apply_leads", "slow_rank_leads"]

_ALARMS = ("critical", "warning")


def lead(findings: list[Finding], leader: Finding, follows: Callable[[Finding], bool], pointer: str,
         raise_leader: bool = True) -> list[Finding]:
    """``findings`` with each alarm other than ``leader`` for which ``follows`` holds made ``info``, its title
    ending in ``pointer``; the leader takes the higher severity of the two unless ``raise_leader`` is False."""
    out = []
    for f in findings:
        if f is not leader and f.severity in _ALARMS and follows(f):
            if raise_leader and SEVERITIES.index(f.severity) < SEVERITIES.index(leader.severity):
                leader.severity = f.severity
            f = replace(f, severity="info", title=f"{f.title}; {pointer}")
        out.append(f)
    return out


def _first_alarm(findings: list[Finding], rule: str) -> Finding | None:
    return next((f for f in findings if f.id == rule and f.severity in _ALARMS), None)


def _names(site: str) -> Callable[[Finding], bool]:
    return lambda f: any(c.get("call_site") == site for c in f.evidence.call_sites)


def slow_rank_leads(findings: list[Finding], slow: Finding) -> list[Finding]:
    """On the slow rank, a warning about the very line its excess comes from (the slow-rank cause's call
    site) is that cause seen from inside the rank; slow_rank also counts what every other rank waits for it.
    (The same Python shard parser: 21% of the rank's step as side work against 19% as the rank's excess.)"""
    site = slow.evidence.metrics.get("call_site")
    if not site:
        return findings
    return lead(findings, slow, _names(site), f"this is what makes rank {slow.rank} the slow rank (see slow_rank)")


def _periodic_work_leads(findings: list[Finding]) -> list[Finding]:
    """A side_work or host_outside_ops warning about the line step_outliers names as its slow steps' work (a
    checkpoint every 5th step) is that work seen as a share of all steps; step_outliers also says when it
    runs. Only those two: a DataLoader whose slow batches make the slow steps stays data_loading's finding
    (demoting it let an op storm inside the loader lead on loader_getitem)."""
    outliers = next((f for f in findings if f.id == "step_outliers" and f.severity in _ALARMS
                     and f.evidence.call_sites), None)
    if outliers is None:
        return findings
    named = _names(outliers.evidence.call_sites[0]["call_site"])
    return lead(findings, outliers, lambda f: f.id in ("side_work", "host_outside_ops") and named(f),
                "it runs in the slow steps (see step_outliers)")


def _side_work_explains(findings: list[Finding]) -> list[Finding]:
    """host_outside_ops that finds no line with half of its samples ("unexplained") beside side_work, which
    names the function those lines are in (numpy_metrics: side_work 34% at 1 thread, an unexplained
    host_outside_ops 41% at torch's default, the same metrics function)."""
    side = _first_alarm(findings, "side_work")
    if side is None:
        return findings
    return lead(findings, side, lambda f: f.id == "host_outside_ops" and bool(f.evidence.metrics.get("unexplained")),
                f"side_work names the function they are in ({side.evidence.metrics.get('function')})")


def _in_data_loading(f: Finding) -> bool:
    if f.id == "op_storm":
        phases = f.evidence.metrics.get("storm_ns_by_phase") or {}
        return phases.get("data_loading", 0) >= 0.5 * sum(phases.values()) > 0
    if f.id == "step_outliers":
        grew = [s.get("grew_most") for s in f.evidence.steps]
        return bool(grew) and grew.count("data_loading") >= 0.5 * len(grew)
    return False


def _data_loading_owns(findings: list[Finding]) -> list[Finding]:
    """Beside a data_loading warning, an op storm issued mostly inside data loading (a Dataset's
    ``__getitem__`` running tiny tensor ops) and slow steps that mostly grew in data loading are the loader's
    work seen by another rule (loader_getitem: ``aten::as_strided`` 2,659 times a step, 68% of it in data
    loading, and 10 slow batches, under data_loading's 88%)."""
    loading = _first_alarm(findings, "data_loading")
    if loading is None:
        return findings
    return lead(findings, loading, _in_data_loading, "it is in data loading (see data_loading)", raise_leader=False)


def apply_leads(findings: list[Finding]) -> list[Finding]:
    """Every lead within one rank's findings, in order."""
    for step in (_periodic_work_leads, _side_work_explains, _data_loading_owns):
        findings = step(findings)
    return findings
