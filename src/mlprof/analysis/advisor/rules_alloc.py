"""Rule: large fresh tensors created every step on the host (CPU memory churn).

``torch.zeros(big)`` inside the loop allocates new memory each step; on the
CPU, memory above the allocator's reuse comes from the OS as fresh pages,
which the kernel zeroes on first touch and the fill then writes again. The
time shows as ``aten::zeros``/``aten::full`` and the ``fill_`` under them;
this rule owns it, so ``dominant_op`` does not also report the ``fill_``.
Device allocator churn (cudaMalloc) is ``memory_churn`` in rules_device.
"""

from __future__ import annotations

from mlprof.analysis.advisor.context import AdvisorContext
from mlprof.analysis.advisor.model import Evidence, Finding, Thresholds, severity_for

__all__ = ["fresh_tensors", "FACTORY_OP_REGEX", "under_factory_sql"]

# Ops that allocate a tensor and write every element of it.
FACTORY_OP_REGEX = r"^aten::(zeros|ones|full|zeros_like|ones_like|full_like|new_zeros|new_ones|new_full|eye)$"

# host_ops rows (alias h) inside a factory call (another op on the same thread
# whose span holds theirs): their time belongs to this rule. Computed once as
# a set, not per row: a range test of every op against every factory op on
# its thread took 400 s of CPU on a 4.5M-event trace. An op is inside when
# the latest end among the factory ops that started no later than it reaches
# its end (an ASOF join on a running maximum); a factory op itself when one
# before it in (start, longest first) order reaches its end, or another has
# the very same span.
_UNDER_FACTORY_OPS = f"""
    WITH f AS (SELECT window_index AS w, tid, start_ns AS s, start_ns + dur_ns AS e, op_id FROM host_ops
               WHERE regexp_matches(name, '{FACTORY_OP_REGEX}')),
    g AS (SELECT w, tid, s, max(max(e)) OVER (PARTITION BY w, tid ORDER BY s ROWS UNBOUNDED PRECEDING) AS run_e
          FROM f GROUP BY w, tid, s)
    SELECT o.op_id FROM host_ops o ASOF JOIN g ON g.w = o.window_index AND g.tid = o.tid AND g.s <= o.start_ns
    WHERE g.run_e >= o.start_ns + o.dur_ns AND NOT coalesce(regexp_matches(o.name, '{FACTORY_OP_REGEX}'), false)
    UNION ALL
    SELECT op_id FROM (SELECT op_id, e, max(e) OVER (PARTITION BY w, tid ORDER BY s, e DESC, op_id
                                                     ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS before_e
                       FROM f) WHERE before_e >= e
    UNION ALL
    SELECT a.op_id FROM f a JOIN f b ON a.w = b.w AND a.tid = b.tid AND a.s = b.s AND a.e = b.e
                                    AND a.op_id <> b.op_id"""


def under_factory_sql(ctx: AdvisorContext) -> str:
    """Whether host op ``h`` is under a factory op: the ops are found once per output (a range join over
    every op, 0.5-1 s on 4.5M events, that dominant_op asked for up to four times)."""
    return f"h.op_id IN (SELECT op_id FROM {ctx.temp_table('_under_factory', _UNDER_FACTORY_OPS)})"


_FIX = ("Allocate the tensor once, outside the loop, and reuse it: write into it in place (copy_, out=, "
        "index assignment) and zero it only if it must be zero (buf.zero_() still costs a pass, not new "
        "pages). For per-step state, keep a buffer per shape; for masks and constants, build them once.")


def fresh_tensors(ctx: AdvisorContext, th: Thresholds) -> list[Finding]:
    if not ctx.total_step_ns or ctx.has_device:
        return []  # on a GPU run, device allocations are memory_churn's, from the allocator events
    # Only factory calls the job's own code makes: one inside another op (embedding_dense_backward's zeroed
    # gradient, a loss's new_zeros) is torch's, and there is no buffer the user could hoist out of the loop.
    # In time order: an op's input_dims below are its first call's, not the first row a hash join gave.
    rows = ctx.store.dicts(f"""
        SELECT h.window_index AS window, h.step, h.name, h.dur_ns, h.input_dims FROM host_ops h
        LEFT JOIN host_ops p ON p.op_id = h.parent_op_id
        WHERE h.step IS NOT NULL AND h.category = 'cpu_op' AND regexp_matches(h.name, '{FACTORY_OP_REGEX}')
          AND (p.op_id IS NULL OR p.category <> 'cpu_op' OR regexp_matches(p.name, '{FACTORY_OP_REGEX}'))
          AND NOT {under_factory_sql(ctx)}
        ORDER BY h.window_index, h.start_ns, h.op_id""")
    if not rows:
        return []
    by_step: dict[tuple[int, int], int] = {}
    for r in rows:
        key = (r["window"], r["step"])
        by_step[key] = by_step.get(key, 0) + (r["dur_ns"] or 0)
    total_ns = sum(by_step.values())
    judged = ctx.robust_share(lambda s: by_step.get((s.window, s.step), 0))
    severity = severity_for(judged, th.fresh_tensor_warn_share, th)
    if severity is None:
        return []
    share = ctx.share(total_ns)
    ops: dict[str, dict] = {}
    for r in rows:
        o = ops.setdefault(r["name"], {"name": r["name"], "count": 0, "total_ns": 0, "input_dims": r["input_dims"]})
        o["count"] += 1
        o["total_ns"] += r["dur_ns"] or 0
    top = sorted(ops.values(), key=lambda o: (-o["total_ns"], o["name"]))
    per_step = top[0]["count"] / max(len(ctx.steps), 1)
    sites = ctx.sampled_call_sites(f"step IS NOT NULL AND regexp_matches(name, '{FACTORY_OP_REGEX}')", [])
    where = f" at {sites[0]['call_site']}" if sites else ""
    return [Finding(
        id="memory_churn", severity=severity, share=round(share, 4), impact_ns=int(total_ns),
        title=f"Fresh tensors created and filled every step take {share:.0%} of step time "
              f"({per_step:.0f} {top[0]['name']} call(s) per step{where})",
        evidence=Evidence(metrics={"fresh_tensor_ns": total_ns, "calls_per_step": round(len(rows) / max(len(ctx.steps), 1), 1),
                                   "mean_call_ns": int(total_ns / len(rows)), "total_step_ns": ctx.total_step_ns,
                                   "measured_on": "host"},
                          steps=ctx.step_rows(lambda s: by_step.get((s.window, s.step), 0))[:5], ops=top[:5],
                          call_sites=sites),
        fix=_FIX, rank=ctx.rank)]
