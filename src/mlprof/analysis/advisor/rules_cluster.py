"""Rule across ranks: a slow rank makes every other rank wait in its collectives.

Unlike the single-rank rules this one reads a :class:`ClusterReport`; the
finding is attached to the slow rank, with the others' waiting as evidence.
"""

from __future__ import annotations

from mlprof.analysis.advisor.model import Evidence, Finding

__all__ = ["slow_rank_findings"]

_FIX = {
    "compute": ("Rank {rank} computes longer than the others: look for uneven work (unbalanced data shards, "
                "variable sequence lengths, an extra task such as logging/eval/checkpointing on this rank), "
                "a slower or throttled device, or other processes on its host; run `mlprof advise` on its capture."),
    "communication": ("Rank {rank}'s collectives transfer more slowly than the others': check its links "
                      "(NIC/NVLink/PCIe topology, NCCL_* settings, a congested switch port) and its message sizes."),
    "free": ("Rank {rank}'s device idles more than the others': its host launches work late (CPU contention, "
             "data loading, Python overhead); run `mlprof advise` on its capture."),
}


def _cause_hint(s) -> str:
    """Where the excess went, from the rank's attribution (mlprof.analysis.rank_cause)."""
    if s.cause is None:
        return ""
    where = "".join(f" {k} {v}" for k, v in (("at", s.call_site), ("in module", s.module)) if v)
    return f" Most of the excess is {s.cause_label} (+{s.cause_ns / 1e6:.2f} ms per step){where}."


def slow_rank_findings(report) -> list[Finding]:
    """One finding per slow rank of a cluster report (``mlprof.analysis.cluster.ClusterReport``)."""
    by_source = {r.source: r for r in report.ranks}
    findings = []
    for s in report.slow_ranks:
        others_wait = {str(r.rank): r.wait_ns for r in report.ranks if r.source != s.source}
        me = by_source.get(s.source)
        findings.append(Finding(
            id="slow_rank", severity=s.severity, share=s.share_of_step,
            impact_ns=int(s.excess_ns * (me.steps if me else 1)),
            title=f"Rank {s.rank} is slow: {s.excess_in} {s.value_ns / 1e6:.2f} ms per step vs "
                  f"{s.median_ns / 1e6:.2f} ms on the other ranks (+{s.share_of_step:.0%} of a step)"
                  + ("" if s.cause is None else f", mostly {s.cause_label} (+{s.cause_ns / 1e6:.2f} ms)"),
            evidence=Evidence(metrics={"source": s.source, "excess_in": s.excess_in, "cause": s.cause,
                                       "cause_ns": s.cause_ns, "call_site": s.call_site, "module": s.module,
                                       "value_ns": s.value_ns, "others_ns": s.median_ns,
                                       "excess_ns": s.excess_ns, "ranks": len(report.ranks),
                                       "others_wait_ns_per_step": others_wait, "also_in": s.also_in},
                              steps=[r for r in report.step_rows if r["source"] == s.source][:10]),
            fix=_FIX[s.excess_in].format(rank=s.rank) + _cause_hint(s), rank=s.rank))
    return findings
