"""One op the user called that leads the step while its time is spread over the ops inside it and its
backward: ``torch.cdist`` over a large bank is ``aten::_euclidean_dist``'s mm, div, fill_ and eq forward and
``EuclideanDistBackward0``'s ops backward, none of them a quarter of the step, together 90% of it. Judged on
host time (CPU runs); on a device run the kernels are the measure and ``dominant_op`` reads those."""

from __future__ import annotations

from mlprof.analysis.advisor.context import AdvisorContext
from mlprof.analysis.advisor.model import Evidence, Finding, Thresholds, severity_for
from mlprof.tables.names import (BACKWARD_NODE_PREFIX, HOST_COMMUNICATION_REGEX, OPTIMIZER_PREFIX, backward_node_sql,
                                 data_loading_sql, step_span_sql)

__all__ = ["composite_ops", "composite_finding"]

# A call worth judging as one op: a storm of tiny calls is op_storm's.
_MIN_NS_PER_CALL = 50_000


def composite_ops(ctx: AdvisorContext) -> list[dict]:
    """Outermost ops (no op above them) by name: calls, their inclusive time and the time of the autograd
    nodes the ops inside them created (``backward_links``), largest first."""
    return ctx.store.dicts(f"""
        WITH outer_ops AS (
            SELECT h.window_index, h.tid, h.name, h.start_ns, h.start_ns + h.dur_ns AS end_ns, h.dur_ns, h.step
            FROM host_ops h LEFT JOIN host_ops p ON p.window_index = h.window_index AND p.op_id = h.parent_op_id
            WHERE h.category = 'cpu_op' AND h.step IS NOT NULL AND coalesce(p.category, '') <> 'cpu_op'
              AND NOT {backward_node_sql("h.name")} AND NOT {step_span_sql('h.name')}
              AND NOT starts_with(h.name, '{OPTIMIZER_PREFIX}') AND NOT {data_loading_sql("h.name")}
              -- A framework op (namespace::op), not a region or annotation (Torch-Compiled Region: 0/0 is
              -- the whole compiled model), nor a collective (communication_overlap's).
              AND h.name LIKE '%::%' AND NOT regexp_matches(h.name, '{HOST_COMMUNICATION_REGEX}')),
        fwd AS (SELECT name, count(*) AS calls, sum(dur_ns) AS forward_ns FROM outer_ops GROUP BY name),
        nodes AS (
            SELECT b.window_index, b.forward_tid, b.forward_start_ns, n.dur_ns, n.name AS node
            FROM backward_links b JOIN host_ops n ON n.window_index = b.window_index AND n.op_id = b.node_op_id
            WHERE b.op_id = b.node_op_id AND b.forward_op_id IS NOT NULL),
        bwd AS (
            -- The outer op a node's forward op ran in: the last outer op on its thread starting before it
            -- (outer ops of a thread do not overlap: an ASOF join, not a range join).
            SELECT o.name, sum(n.dur_ns) AS backward_ns, arg_max(n.node, n.dur_ns) AS top_node
            FROM nodes n ASOF JOIN outer_ops o
              ON o.window_index = n.window_index AND o.tid = n.forward_tid AND n.forward_start_ns >= o.start_ns
            WHERE n.forward_start_ns < o.end_ns GROUP BY o.name)
        SELECT f.name, f.calls, f.forward_ns, coalesce(b.backward_ns, 0) AS backward_ns, b.top_node,
               f.forward_ns + coalesce(b.backward_ns, 0) AS cost_ns
        FROM fwd f LEFT JOIN bwd b USING (name) ORDER BY cost_ns DESC, f.name LIMIT 5""")


def composite_finding(ctx: AdvisorContext, th: Thresholds, leaf_rows: list[dict], op_filter_sql: str,
                      standard) -> Finding | None:
    """The dominant_op finding for a composite op, when no single leaf op reached the bar (``leaf_rows``:
    dominant_op's op rows, largest first, to say what the time is spread over; ``standard(name)``: dense
    math or a standard layer's op, a healthy lead worth an info line only)."""
    if ctx.has_device or not ctx.total_step_ns:
        return None
    rows = composite_ops(ctx)
    if not rows:
        return None
    top = rows[0]
    share = ctx.share(top["cost_ns"])
    if share < th.dominant_op_warn_share or top["cost_ns"] < _MIN_NS_PER_CALL * top["calls"]:
        return None
    # An op that is itself most of its time is no composite: dominant_op judged it as it is.
    own_ns = next((r["cost_ns"] for r in leaf_rows if r["name"] == top["name"]), 0)
    if own_ns >= 0.5 * top["cost_ns"]:
        return None
    expected = standard(top["name"])
    severity = "info" if expected else severity_for(share, th.dominant_op_warn_share, th)
    if severity is None:
        return None
    sites = (ctx.call_sites(f"name = ? AND {op_filter_sql}", [top["name"]])
             or ctx.sampled_call_sites(f"name = ? AND {op_filter_sql}", [top["name"]]))
    site = (sites[0].get("call_site") or sites[0].get("module")) if sites else None
    spread = [r["name"] for r in leaf_rows[:4]]
    node = (top["top_node"] or "").removeprefix(f"{BACKWARD_NODE_PREFIX}: ")
    backward = f" with its backward ({node})" if top["backward_ns"] else ""
    return Finding(
        id="dominant_op", severity=severity, share=round(share, 4), impact_ns=int(top["cost_ns"]),
        title=(f"{top['name']}{backward} takes {share:.0%} of step time" + (f" called from {site}" if site else "")
               + f", spread over the ops inside it ({', '.join(spread)})"),
        evidence=Evidence(
            metrics={"op": top["name"], "composite": True, "count": top["calls"], "forward_ns": top["forward_ns"],
                     "backward_ns": top["backward_ns"], "backward_node": node or None,
                     "expected_compute": expected, "total_step_ns": ctx.total_step_ns},
            ops=[{"name": r["name"], "calls": r["calls"], "forward_ns": r["forward_ns"],
                  "backward_ns": r["backward_ns"], "cost_ns": r["cost_ns"]} for r in rows],
            call_sites=sites),
        fix=(f"{top['name']} is dense math leading the step: the run is compute-bound. Gains come from less work "
             "(smaller shapes, fewer FLOPs) or lower precision." if expected else
             f"One call, {top['name']}" + (f" at {site}" if site else "") + ", and its backward are most of the "
             "step, though no op inside it is: look at what it computes and on what sizes (`mlprof op PATH --name "
             f"{top['name']}`). A cheaper formulation (distances to a few centroids or a sampled subset instead of "
             "all pairs, a smaller bank, a fused or built-in equivalent) or calling it less often is the fix."),
        rank=ctx.rank)
