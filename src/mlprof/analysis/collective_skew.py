"""Collectives across ranks: transfer time against skew, and who arrives last.

An instance of a collective is matched across the ranks of a job by name,
process group and order of issue (:func:`match_instances`). On each rank its
time splits into

* **wait** (skew): latest start of the instance over all ranks - this rank's
  start, capped at the op's duration: the time it waited for the last rank;
* **transit**: the rest, the transfer itself (latency and bandwidth).

From the same instances: the arrival order (which rank started last, how
often, how far behind the first one on average) and per-step per-rank sums
for a heatmap. ``tables.names.collective_kind`` names a collective the same way
whatever the backend and version called it (``gloo:all_reduce``,
``nccl:all_reduce``, ``c10d::allreduce_``, ``ncclKernel_AllReduce_RING_LL_Sum_float``,
``ncclDevKernel_AllReduce_Sum_f32_RING_LL``, HCCL's ``hcom_allReduce_`` ...).
"""

from __future__ import annotations

from mlprof.tables.names import collective_kind

__all__ = ["match_instances", "instance_waits", "instance_lateness", "arrival_stats", "skew_rows"]


def match_instances(ranks: list[dict], key) -> list[list[tuple[int, int, int]]]:
    """Instances seen on 2+ ranks, each a list of (rank index, op index, start ns); ``key(op)`` names the
    collective and its group."""
    instances: dict[tuple, list[tuple[int, int, int]]] = {}
    for ri, r in enumerate(ranks):
        seen: dict[tuple, int] = {}
        for oi, op in enumerate(r["comm_ops"]):
            k = key(op)
            n = seen.get(k, 0)
            seen[k] = n + 1
            instances.setdefault((*k, n), []).append((ri, oi, op["start_ns"]))
    return [members for members in instances.values() if len(members) >= 2]


def _offsets(instances: list[list[tuple[int, int, int]]], late: bool) -> dict[tuple[int, int], int]:
    out = {}
    for members in instances:
        starts = [start for _, _, start in members]
        first, last = min(starts), max(starts)
        for ri, oi, start in members:
            out[(ri, oi)] = start - first if late else last - start
    return out


def instance_waits(instances: list[list[tuple[int, int, int]]]) -> dict[tuple[int, int], int]:
    """Wait ns per (rank index, op index): latest start among the instance's ranks - own start."""
    return _offsets(instances, late=False)


def instance_lateness(instances: list[list[tuple[int, int, int]]]) -> dict[tuple[int, int], int]:
    """Lateness ns per (rank index, op index): own start - earliest start among the instance's ranks."""
    return _offsets(instances, late=True)


def arrival_stats(ranks: list[dict], instances: list[list[tuple[int, int, int]]], key) -> list[dict]:
    """Per collective, group and rank: instances, times last to arrive (ties: every rank at the latest
    start), its share, and the mean lateness behind the first rank to arrive."""
    acc: dict[tuple, dict] = {}
    for members in instances:
        first = min(start for _, _, start in members)
        last = max(start for _, _, start in members)
        ri0, oi0, _ = members[0]
        name, grp = key(ranks[ri0]["comm_ops"][oi0])
        for ri, _, start in members:
            a = acc.setdefault((name, grp, ri), {"instances": 0, "last": 0, "late_ns": 0})
            a["instances"] += 1
            a["last"] += start == last
            a["late_ns"] += start - first
    out = []
    for (name, grp, ri), a in sorted(acc.items(), key=lambda kv: (kv[0][0], kv[0][1], kv[0][2])):
        out.append({"collective": name, "kind": collective_kind(name), "group": grp, "rank": ranks[ri]["rank"],
                    "source": ranks[ri]["source"], "instances": a["instances"], "last_count": a["last"],
                    "last_share": round(a["last"] / a["instances"], 4),
                    "mean_late_ns": round(a["late_ns"] / a["instances"])})
    return out


def skew_rows(ranks: list[dict], op_waits: list[list[int]], op_late: list[list[int]] | None = None) -> list[dict]:
    """Per rank and step (heatmap data): collectives' wait (skew), transit and lateness (how far behind
    the first rank each collective was reached: the late rank's own share of the skew) ns, and their count."""
    out = []
    for i, (r, waits) in enumerate(zip(ranks, op_waits)):
        lates = op_late[i] if op_late is not None else [0] * len(waits)
        by_step: dict = {}
        for op, wait, late in zip(r["comm_ops"], waits, lates):
            s = by_step.setdefault(op["step"], {"wait_ns": 0, "transit_ns": 0, "late_ns": 0, "count": 0})
            s["wait_ns"] += wait
            s["transit_ns"] += op["dur_ns"] - wait
            s["late_ns"] += late
            s["count"] += 1
        out += [{"rank": r["rank"], "source": r["source"], "step": step, **v}
                for step, v in sorted(by_step.items(), key=lambda kv: (kv[0] is None, kv[0] or 0))]
    return out
