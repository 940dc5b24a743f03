"""How much of the step the findings explain, counted once.

Findings overlap: an op storm is also forward time, a dominant module holds
a dominant op. Each finding that warns is placed in the part of the step its
time comes from (the host phases of the attribution layer, docs/attribution.md);
within a part the largest finding counts, capped at that part's time, and
the parts add up. That is a lower bound: two findings on disjoint ops of one
part count as the larger one. What is left is step time no warning accounts
for: the report says so instead of implying the findings cover everything.
Cross-cutting findings (a slow rank, outlier steps, CPU contention) say why
time is long everywhere; they are listed but add no time of their own.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from mlprof.analysis.advisor.model import Finding
from mlprof.analysis.steps import HOST_FIELDS, StepBreakdown

__all__ = ["Explained", "explain", "FINDING_PART", "CROSS_CUTTING"]

# The part of the step (a group of host phases) each rule's time lies in.
PARTS = {
    "compute": ("forward", "backward", "optimizer", "other"),
    "data_loading": ("data_loading",),
    "gc": ("gc",),
    "python": ("python",),
    "communication": ("communication",),
}
FINDING_PART = {
    "data_loading": "data_loading", "gc_pauses": "gc", "host_outside_ops": "python",
    "communication_overlap": "communication",
    **dict.fromkeys(("op_storm", "dominant_op", "dominant_module", "slow_dtype", "memory_churn", "device_idle",
                     "synchronization", "recompilation", "dynamic_shapes", "ai_cpu_ops", "npu_op_compile",
                     "anomaly_detection", "launch_blocking"),
                    "compute"),
}
CROSS_CUTTING = ("side_work", "slow_rank", "step_outliers", "cpu_contention", "cpu_oversubscription")


@dataclass
class Explained:
    explained_share: float  # of total step time, counted once
    unexplained_share: float
    by_part: dict[str, dict] = field(default_factory=dict)  # part -> {"share", "explained_share", "findings"}
    cross_cutting: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


def explain(findings: list[Finding], steps: list[StepBreakdown], total_step_ns: int) -> Explained | None:
    if not total_step_ns or not steps:
        return None
    warns = [f for f in findings if f.severity in ("critical", "warning")]
    by_part: dict[str, dict] = {}
    explained = 0.0
    for part, phases in PARTS.items():
        part_ns = sum(getattr(s, HOST_FIELDS[p]) or 0 for s in steps for p in phases)
        part_share = part_ns / total_step_ns
        mine = [f for f in warns if FINDING_PART.get(f.id) == part]
        # Device-measured communication lies inside host compute phases: its cap is the whole step.
        cap = 1.0 if part == "communication" and any(
            f.evidence.metrics.get("measured_on") == "device" for f in mine) else part_share
        covered = min(max((f.share for f in mine), default=0.0), cap)
        explained += covered
        if part_share or covered:
            by_part[part] = {"share": round(part_share, 4), "explained_share": round(covered, 4),
                             "findings": [f.id for f in mine]}
    explained = min(explained, 1.0)
    cross = sorted({f.id for f in warns if f.id in CROSS_CUTTING})
    return Explained(explained_share=round(explained, 4), unexplained_share=round(1.0 - explained, 4),
                     by_part=by_part, cross_cutting=cross)
