"""Cluster analysis: every rank of a job at once.

Each rank is reduced to small data (:func:`mlprof.analysis.cluster_data.extract_rank`
over its tables; ``mlprof.cluster(path)`` in :mod:`mlprof.workflow` parses the
ranks and extracts that data in worker processes or on a Dask cluster);
:func:`combine` then builds, from that data only:

* a per-rank table of mean step time split into compute, communication
  (wait and transit) and free (device idle) time, and per-rank per-step rows;
* slow ranks: a rank whose compute, communication transit or free time
  exceeds the ranks' median by ``slow_rank_warn_share`` of the median step
  (``excess_in``), and its cause read from its attribution against the other
  ranks' (:mod:`mlprof.analysis.rank_cause`: the phase or finding that makes up
  the excess, with its call site or module);
* communication per collective and rank: count, time, wait, transit, bytes,
  bandwidth (bytes / transit);
* a communication matrix (source rank, destination rank) where group
  membership is recorded;
* arrival order per collective and rank (who arrives last, how often) and
  per-step per-rank wait/transit (heatmap data), :mod:`mlprof.analysis.collective_skew`.

Wait time of one collective instance on one rank = latest start of that
instance over all ranks - this rank's start (the time it waited for the
others to arrive); instances are matched by name, group and order of issue.
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from mlprof.analysis.jobs import RunIdentity, group_jobs
from mlprof.analysis.advisor.model import Thresholds
from mlprof.analysis.cluster_data import group_key
from mlprof.analysis.collective_skew import (arrival_stats, instance_lateness, instance_waits, match_instances,
                                             skew_rows)
from mlprof.analysis.rank_cause import JobBaseline, median_without, slow_rank_cause
from mlprof.errors import MlprofError
from mlprof.tables.names import collective_kind

__all__ = ["RankSummary", "SlowRank", "CollectiveStat", "ClusterReport", "combine"]


@dataclass(frozen=True)
class RankSummary:
    """Means per step of one rank."""

    rank: int | None
    source: str
    steps: int
    step_ns: float
    compute_ns: float
    communication_ns: float
    wait_ns: float  # communication spent waiting for other ranks
    transit_ns: float  # communication - wait
    free_ns: float | None  # device idle (None on CPU-only ranks)
    data_loading_ns: float


@dataclass(frozen=True)
class SlowRank:
    rank: int | None
    source: str  # the rank's capture or trace
    excess_in: str  # where the excess shows: compute, communication (transit) or free (device idle)
    value_ns: float  # this rank's mean per step
    median_ns: float  # the ranks' median
    excess_ns: float
    share_of_step: float  # excess / median step time
    severity: str
    # Why, from the attribution (mlprof.analysis.rank_cause): a phase of tables.phases (gc, data_loading,
    # forward, python, ...), cpu_contention, input_size, device_compute or communication_transit; None
    # when the ranks carry no attribution.
    cause: str | None = None
    cause_label: str | None = None
    cause_ns: float | None = None  # the cause's excess over the other ranks' median, per step
    cause_share_of_wait: float | None = None  # cause_ns / the other ranks' median wait in collectives per step
    call_site: str | None = None
    module: str | None = None
    components: list[dict] = field(default_factory=list)  # every positive excess, largest first
    # The rank's smaller excesses in other measures (excess_in, value_ns, median_ns, excess_ns, share_of_step):
    # a rank that arrives late by its own compute often shows a longer transit too; one entry per rank.
    also_in: list[dict] = field(default_factory=list)


@dataclass(frozen=True)
class CollectiveStat:
    collective: str
    group: str
    rank: int | None
    count: int
    total_ns: int
    wait_ns: int
    transit_ns: int
    size_bytes: int | None
    bandwidth_gb_per_s: float | None  # bytes / transit ns
    kind: str | None = None  # allreduce, allgather, ... whatever the backend named it (collective_kind)


@dataclass
class ClusterReport:
    ranks: list[RankSummary]
    step_rows: list[dict]  # per rank and step: dur, compute, communication, free
    slow_ranks: list[SlowRank]
    collectives: list[CollectiveStat]
    matrix: list[dict]  # {src_rank, dst_rank, collective, size_bytes, time_ns, bandwidth_gb_per_s}
    failed: list[dict] = field(default_factory=list)  # {source, error} of ranks that could not be read
    # Sources of each job: ranks are compared only within a job (mlprof.analysis.jobs).
    jobs: list[list[str]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    # Per collective, group and rank: who arrives last and how often (collective_skew.arrival_stats).
    arrivals: list[dict] = field(default_factory=list)
    # Per rank and step: collectives' wait (skew) and transit ns, for a heatmap (collective_skew.skew_rows).
    skew_rows: list[dict] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


def _mean(values: list) -> float:
    vals = [v for v in values if v is not None]
    return sum(vals) / len(vals) if vals else 0.0


def combine(ranks: list[dict], thresholds: Thresholds | None = None) -> ClusterReport:
    """Build the cluster report from per-rank data (:func:`~mlprof.analysis.cluster_data.extract_rank`;
    ``{"source", "error"}`` entries, ranks that could not be read, become ``failed``)."""
    th = thresholds or Thresholds()
    failed = [r for r in ranks if "error" in r]
    good = sorted((r for r in ranks if "error" not in r),
                  key=lambda r: (r["rank"] is None, r["rank"] if r["rank"] is not None else 0, r["source"]))
    if not good:
        raise MlprofError("cluster: no rank could be read" + (f" ({failed[0]['error']})" if failed else ""))
    if all("identity" in r for r in good):
        grouping = group_jobs([RunIdentity(**r["identity"]) for r in good])
        by_source = {r["source"]: r for r in good}
        jobs = [[by_source[m.source] for m in job] for job in grouping.jobs]
        warnings = list(grouping.warnings)
    else:  # rank data made by hand: one job
        jobs, warnings = [good], []
    if len(jobs) > 1:
        warnings.insert(0, f"{len(jobs)} separate jobs or runs here, not ranks of one job: ranks are compared "
                           "only within a job (" + "; ".join(
                               ", ".join(f"rank {r['rank']}" if r["rank"] is not None else Path(r["source"]).name
                                         for r in job) for job in jobs) + ")")
    report = ClusterReport(ranks=[], step_rows=[], slow_ranks=[], collectives=[], matrix=[],
                           failed=[{"source": f["source"], "error": f["error"]} for f in failed],
                           jobs=[[r["source"] for r in job] for job in jobs], warnings=warnings)
    for job in jobs:
        part = _combine_job(job, th)
        for name in ("ranks", "step_rows", "slow_ranks", "collectives", "matrix", "arrivals", "skew_rows"):
            getattr(report, name).extend(getattr(part, name))
    return report


def _typical_mean(values: list) -> float:
    """Mean without the largest value (5+ values): one step hit by a preemption must not make a slow rank."""
    vals = [v for v in values if v is not None]
    if len(vals) >= 5:
        vals.remove(max(vals))
    return sum(vals) / len(vals) if vals else 0.0


def _combine_job(good: list[dict], th: Thresholds) -> ClusterReport:
    """The cross-rank figures of the ranks of one job."""
    instances = match_instances(good, group_key)
    waits = instance_waits(instances)
    summaries, step_rows, collectives, matrix, all_waits = [], [], [], [], []
    typical: dict[str, dict[str, float | None]] = {}
    for ri, r in enumerate(good):
        op_wait = [min(waits.get((ri, oi), 0), op["dur_ns"]) for oi, op in enumerate(r["comm_ops"])]
        all_waits.append(op_wait)
        n_steps = max(len(r["steps"]), 1)
        wait_total = sum(op_wait)
        comm_mean = _mean([s["communication_ns"] for s in r["steps"]])
        # Wait is counted on the ops' own durations; capped by the step-level communication figure.
        wait_mean = min(wait_total / n_steps, comm_mean)
        free_vals = [s["free_ns"] for s in r["steps"]]
        typical[r["source"]] = {
            "compute": _typical_mean([s["compute_ns"] for s in r["steps"]]),
            "communication": max(_typical_mean([s["communication_ns"] for s in r["steps"]]) - wait_mean, 0.0),
            "free": None if all(v is None for v in free_vals) else _typical_mean(free_vals)}
        summaries.append(RankSummary(
            rank=r["rank"], source=r["source"], steps=len(r["steps"]), step_ns=_mean([s["dur_ns"] for s in r["steps"]]),
            compute_ns=_mean([s["compute_ns"] for s in r["steps"]]), communication_ns=comm_mean, wait_ns=wait_mean,
            transit_ns=comm_mean - wait_mean,
            free_ns=None if all(v is None for v in free_vals) else _mean(free_vals),
            data_loading_ns=_mean([s["data_loading_ns"] for s in r["steps"]])))
        step_rows += [{"rank": r["rank"], "source": r["source"], **s} for s in r["steps"]]
        by_coll: dict[tuple, dict] = {}
        for op, wait in zip(r["comm_ops"], op_wait):
            c = by_coll.setdefault(group_key(op), {"count": 0, "total": 0, "wait": 0, "bytes": 0, "known": True})
            c["count"] += 1
            c["total"] += op["dur_ns"]
            c["wait"] += wait
            if op.get("size_bytes") is None:
                c["known"] = False
            else:
                c["bytes"] += op["size_bytes"]
        for (name, grp), c in sorted(by_coll.items()):
            transit = c["total"] - c["wait"]
            size = c["bytes"] if c["known"] else None
            collectives.append(CollectiveStat(
                collective=name, group=grp, rank=r["rank"], count=c["count"], total_ns=c["total"], wait_ns=c["wait"],
                transit_ns=transit, size_bytes=size,
                bandwidth_gb_per_s=round(size / transit, 4) if size and transit > 0 else None,
                kind=collective_kind(name)))
        for m in r["matrix"]:
            for dst in m.get("dst_ranks") or []:
                if isinstance(dst, int) and dst != r["rank"]:
                    matrix.append({"src_rank": r["rank"], "dst_rank": dst, "collective": m["collective_name"],
                                   "group": m["group_name"], "count": m["count"], "size_bytes": m["size_bytes"],
                                   "time_ns": m["time_ns"], "bandwidth_gb_per_s": m["bandwidth_gb_per_s"]})
    slow = _slow_ranks(summaries, th, typical) if len(summaries) > 1 else []
    if slow:
        job = JobBaseline([r.get("attribution") for r in good])
        waits_sorted = sorted(x.wait_ns for x in summaries)
        slow = [_with_cause(s, good, summaries, job, waits_sorted) for s in slow]
    return ClusterReport(ranks=summaries, step_rows=step_rows, slow_ranks=slow, collectives=collectives,
                         matrix=matrix, arrivals=arrival_stats(good, instances, group_key),
                         skew_rows=skew_rows(good, all_waits, _lateness(good, instances)))


def _lateness(ranks: list[dict], instances: list) -> list[list[int]]:
    late = instance_lateness(instances)
    return [[late.get((ri, oi), 0) for oi in range(len(r["comm_ops"]))] for ri, r in enumerate(ranks)]


def _with_cause(s: SlowRank, ranks: list[dict], summaries: list[RankSummary], job: JobBaseline,
                waits_sorted: list[float]) -> SlowRank:
    """``s`` with its cause read from the ranks' attribution (unchanged where the ranks carry none)."""
    me = next((r.get("attribution") for r in ranks if r["source"] == s.source), None)
    own_wait = next(x.wait_ns for x in summaries if x.source == s.source)
    others_wait = median_without(waits_sorted, own_wait) or 0.0
    host = next((r.get("comm_kind") == "host" for r in ranks if r["source"] == s.source), False)
    cause = slow_rank_cause(me, job, s.excess_in, s.excess_ns, others_wait, host_collectives=host)
    if cause is None:
        return s
    return replace(s, cause=cause["cause"], cause_label=cause["label"], cause_ns=cause["excess_ns"],
                   cause_share_of_wait=cause["share_of_others_wait"], call_site=cause["call_site"],
                   module=cause["module"], components=cause["components"])


def _slow_ranks(ranks: list[RankSummary], th: Thresholds,
                typical: dict[str, dict[str, float | None]] | None = None) -> list[SlowRank]:
    """Ranks whose own work (not their waiting) is longer than the others'.

    Waiting is the symptom on the fast ranks, so communication is judged by
    transit time; compute and device-idle time directly. With ``typical``
    (each rank's figures without its worst step) the excess must also hold
    there, so one disturbed step does not name a slow rank.
    """
    if len(ranks) < 2:
        return []
    median_step = statistics.median(r.step_ns for r in ranks)
    if not median_step:
        return []
    found = []
    for cause, get in (("compute", lambda r: r.compute_ns), ("communication", lambda r: r.transit_ns),
                       ("free", lambda r: r.free_ns)):
        values = [get(r) for r in ranks]
        if any(v is None for v in values):
            continue
        # With 2 ranks the median is their mean; compare with the others' lowest
        # value instead so the slow one is not half hidden by itself. The median of
        # the others is read off the sorted values (1,024 ranks: no pass per rank).
        ordered = sorted(values)
        for r, v in zip(ranks, values):
            base = median_without(ordered, v)
            excess = v - base
            share = excess / median_step
            if share >= th.slow_rank_warn_share and typical is not None and r.source in typical:
                mine = typical[r.source].get(cause)
                rest = [typical[rr.source].get(cause) for rr in ranks if rr is not r and rr.source in typical]
                rest = [x for x in rest if x is not None]
                if mine is not None and rest:
                    typical_base = statistics.median(rest) if len(rest) > 1 else rest[0]
                    if (mine - typical_base) / median_step < th.slow_rank_warn_share:
                        continue  # the excess came from one step: not a slow rank
            if share >= th.slow_rank_warn_share:
                severity = "critical" if share >= th.critical_share else "warning"
                found.append(SlowRank(rank=r.rank, source=r.source, excess_in=cause, value_ns=v, median_ns=base, excess_ns=excess,
                                      share_of_step=round(share, 4), severity=severity))
    found.sort(key=lambda s: -s.excess_ns)
    first: dict[str, SlowRank] = {}
    for s in found:
        if s.source in first:
            first[s.source].also_in.append({k: getattr(s, k) for k in ("excess_in", "value_ns", "median_ns",
                                                                       "excess_ns", "share_of_step")})
        else:
            first[s.source] = s
    return list(first.values())

