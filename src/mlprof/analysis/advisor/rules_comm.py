"""Rule: communication that computation does not hide, on device traces and on CPU (gloo) ranks."""

from __future__ import annotations

import numpy as np

from mlprof.analysis.advisor.context import AdvisorContext
from mlprof.analysis.advisor.model import Evidence, Finding, Thresholds, severity_for
from mlprof.analysis.intervals import union_length
from mlprof.tables.names import BACKEND_COLLECTIVE_REGEX, HOST_COMMUNICATION_REGEX, STEP_EVENT_PREFIX, step_span_sql

__all__ = ["communication_overlap", "exposed_by_step", "host_exposed_communication", "split_waiting"]

_FIX = ("Overlap gradients' all-reduce with backward: DDP bucket sizes (bucket_cap_mb), "
        "gradient_as_bucket_view=True, no_sync() for accumulation steps; for FSDP, forward/backward "
        "prefetch. Exposed communication that is mostly waiting means another rank is late: find it with "
        "`mlprof cluster` and fix that rank first; else check the interconnect against the collectives' bandwidth.")


def _clipped(start: np.ndarray, end: np.ndarray, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
    s, e = np.maximum(start, lo), np.minimum(end, hi)
    keep = e > s
    return s[keep], e[keep]


def host_exposed_communication(ctx: AdvisorContext) -> dict[tuple[int, int], tuple[int, int]]:
    """CPU ranks: per (window, step), (communication ns, exposed ns).

    Communication = union of host communication annotations (gloo:*, ...) on
    any thread; exposed = the part of it during which the step's own thread
    runs no other op (the training thread is blocked on the result).
    """
    q = ctx.store.sql(f"""
        SELECT h.window_index AS win, h.step, h.start_ns, h.start_ns + h.dur_ns AS end_ns,
               regexp_matches(h.name, '{HOST_COMMUNICATION_REGEX}') AS is_comm,
               h.tid = st.tid AS on_step_thread
        FROM host_ops h JOIN (SELECT window_index, tid, name FROM host_ops WHERE {step_span_sql()}) st
             ON st.window_index = h.window_index AND st.name = '{STEP_EVENT_PREFIX}' || h.step
        WHERE h.step IS NOT NULL AND h.category <> 'python_function' AND NOT {step_span_sql('h.name')}
          AND (regexp_matches(h.name, '{HOST_COMMUNICATION_REGEX}') OR coalesce(h.depth, 0) <= 1)""").fetchnumpy()
    out = {}
    arr = {k: np.asarray(v) for k, v in q.items()}
    is_comm = arr["is_comm"].astype(bool)
    if not is_comm.any():  # no collective on any thread: nothing is exposed
        return out
    busy_op = ~is_comm & arr["on_step_thread"].astype(bool)
    # Rows grouped by (window, step) once: a mask over every row per step was
    # steps x rows (12 s for 20,000 steps of a 10M-event trace).
    order = np.lexsort((arr["step"], arr["win"]))
    win, step = arr["win"][order], arr["step"][order]
    first = np.flatnonzero(np.r_[True, (win[1:] != win[:-1]) | (step[1:] != step[:-1])])
    rows_of = {(int(win[a]), int(step[a])): order[a:b] for a, b in zip(first, np.r_[first[1:], len(order)])}
    for s in ctx.steps:
        rows = rows_of.get((s.window, s.step))
        if rows is None or not is_comm[rows].any():
            continue
        comm, busy = rows[is_comm[rows]], rows[busy_op[rows]]
        cs, ce = _clipped(arr["start_ns"][comm], arr["end_ns"][comm], s.start_ns, s.end_ns)
        bs, be = _clipped(arr["start_ns"][busy], arr["end_ns"][busy], s.start_ns, s.end_ns)
        comm_ns = union_length(cs, ce)
        exposed = union_length(np.concatenate([cs, bs]), np.concatenate([ce, be])) - union_length(bs, be)
        out[(s.window, s.step)] = (comm_ns, exposed)
    return out


def exposed_by_step(ctx: AdvisorContext) -> dict[int, int]:
    """Exposed communication ns per step number (device traces: not overlapped; CPU ranks: host-blocked)."""
    if ctx.has_device:
        return {s.step: int(s.communication_not_overlapped_ns or 0) for s in ctx.steps}
    out: dict[int, int] = {}
    for (_, step), (_, exposed) in host_exposed_communication(ctx).items():
        out[step] = out.get(step, 0) + exposed
    return out


def split_waiting(finding: Finding, own: dict[int, int], others: list[dict[int, int]], total_step_ns: int,
                  th: Thresholds, slow_ranks: list[str]) -> Finding:
    """Re-rate a rank's exposed communication by what the other ranks of its job saw.

    In a collective, the last rank to arrive waits least: per step, the smallest exposed time among
    the ranks bounds the transfer itself, and the rest of a rank's exposed time is waiting for a later
    rank (imbalance, a slow rank, jitter). Only the transfer is this finding's to fix.
    """
    transfer_by_step = {step: min([ns, *(o[step] for o in others if step in o)]) for step, ns in own.items()}
    transfer = sum(transfer_by_step.values())
    exposed = sum(own.values())
    waiting = max(exposed - transfer, 0)
    if not waiting or not total_step_ns:
        return finding
    share = transfer / total_step_ns
    # Judged like the rule itself: without the worst step (5+ steps), one preempted step is not a culprit.
    judged = share
    if len(transfer_by_step) >= 5:
        judged = (transfer - max(transfer_by_step.values())) / total_step_ns * len(own) / (len(own) - 1)
    severity = severity_for(min(share, judged), th.communication_warn_share, th) or "info"
    late = f" for rank {', '.join(slow_ranks)} (slow_rank)" if slow_ranks else " for later ranks"
    finding.severity = severity
    finding.share = round(share, 4)
    finding.impact_ns = int(transfer)
    finding.title = (f"Un-overlapped communication: {share:.0%} of step time in transfers, plus "
                     f"{waiting / total_step_ns:.0%} waiting{late}")
    finding.evidence.metrics.update({"transfer_ns": int(transfer), "waiting_ns": int(waiting),
                                     "waiting_for": slow_ranks or None})
    if slow_ranks:
        finding.fix = (f"Most of this rank's exposed communication waits for rank {', '.join(slow_ranks)}: "
                       "fix that rank first (see its slow_rank finding). " + finding.fix)
    return finding


def _name_slices(ctx: AdvisorContext, kinds: list[dict]) -> None:
    """Give each collective kind the name of a slice the timeline and operator table know: a collective
    name no op carries (torch_npu's "allreduce", whose host op is HcclAllreduce) becomes the host op its
    device ops were launched by, the collective kept beside it (the link said "No slice named allreduce")."""
    for row in kinds:
        known = ctx.store.rows("SELECT 1 FROM host_ops WHERE name = ? UNION ALL SELECT 1 FROM device_ops WHERE "
                               "name = ? LIMIT 1", [row["name"], row["name"]])
        if known:
            continue
        host = ctx.store.rows("""
            SELECT h.name FROM collectives c JOIN device_ops d USING (device_op_id)
            JOIN host_ops h ON h.op_id = d.host_op_id
            WHERE coalesce(c.collective_name, c.name) = ? AND c.step IS NOT NULL
            GROUP BY 1 ORDER BY count(*) DESC, 1 LIMIT 1""", [row["name"]])
        if host:
            row["collective"], row["name"] = row["name"], host[0][0]


def communication_overlap(ctx: AdvisorContext, th: Thresholds) -> list[Finding]:
    """Communication the computation does not hide."""
    if ctx.has_device:
        exposed_ns = sum(s.communication_not_overlapped_ns or 0 for s in ctx.steps)
        total_comm = sum(s.communication_ns or 0 for s in ctx.steps)
        steps = ctx.step_rows(lambda s: s.communication_not_overlapped_ns)[:5]
        kinds = ctx.store.dicts("""
            SELECT coalesce(collective_name, name) AS name, count(*) AS count, sum(dur_ns) AS total_ns,
                   sum(size_bytes) AS size_bytes, sum(size_bytes) / nullif(sum(dur_ns), 0) AS bandwidth_gb_per_s
            FROM collectives WHERE step IS NOT NULL GROUP BY 1 ORDER BY total_ns DESC, 1""")
        _name_slices(ctx, kinds)
        if not kinds:
            kinds = ctx.store.dicts("""SELECT name, count(*) AS count, sum(dur_ns) AS total_ns FROM device_ops
                WHERE is_communication AND step IS NOT NULL GROUP BY 1 ORDER BY total_ns DESC, 1 LIMIT 10""")
    else:
        per_step = host_exposed_communication(ctx)
        if not per_step:
            return []
        exposed_ns = sum(e for _, e in per_step.values())
        total_comm = sum(c for c, _ in per_step.values())
        steps = sorted(({"step": st, "window": w, "communication_ns": c, "value_ns": e}
                        for (w, st), (c, e) in per_step.items()), key=lambda r: -r["value_ns"])[:5]
        kinds = ctx.store.dicts(f"""SELECT name, count(*) AS count, sum(dur_ns) AS total_ns FROM host_ops
            WHERE step IS NOT NULL AND regexp_matches(name, '{BACKEND_COLLECTIVE_REGEX}')
            GROUP BY 1 ORDER BY total_ns DESC, 1""")
    share = ctx.share(exposed_ns)
    by_step = exposed_by_step(ctx)
    severity = severity_for(ctx.robust_share(lambda s: by_step.get(s.step, 0)), th.communication_warn_share, th)
    if severity is None or not total_comm:
        return []
    return [Finding(
        id="communication_overlap", severity=severity, share=round(share, 4), impact_ns=int(exposed_ns),
        title=f"Un-overlapped communication: {share:.0%} of step time "
              f"({exposed_ns / total_comm:.0%} of communication is exposed)",
        evidence=Evidence(metrics={"exposed_ns": exposed_ns, "communication_ns": total_comm,
                                   "total_step_ns": ctx.total_step_ns,
                                   "measured_on": "device" if ctx.has_device else "host"},
                          steps=steps, ops=kinds),
        fix=_FIX, rank=ctx.rank)]
