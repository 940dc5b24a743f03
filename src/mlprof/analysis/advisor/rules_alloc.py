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

__all__ = ["fresh_tensors", "FACTORY_OP_REGEX", "UNDER_FACTORY_SQL"]

# Ops that allocate a tensor and write every element of it.
FACTORY_OP_REGEX = r"^aten::(zeros|ones|full|zeros_like|ones_like|full_like|new_zeros|new_ones|new_full|eye)$"

# host_ops rows (alias h) inside a factory call: their time belongs to this rule.
UNDER_FACTORY_SQL = f"""EXISTS (SELECT 1 FROM host_ops f WHERE f.window_index = h.window_index AND f.tid = h.tid
    AND regexp_matches(f.name, '{FACTORY_OP_REGEX}') AND f.op_id <> h.op_id
    AND f.start_ns <= h.start_ns AND f.start_ns + f.dur_ns >= h.start_ns + h.dur_ns)"""

_FIX = ("Allocate the tensor once, outside the loop, and reuse it: write into it in place (copy_, out=, "
        "index assignment) and zero it only if it must be zero (buf.zero_() still costs a pass, not new "
        "pages). For per-step state, keep a buffer per shape; for masks and constants, build them once.")


def fresh_tensors(ctx: AdvisorContext, th: Thresholds) -> list[Finding]:
    if not ctx.total_step_ns or ctx.has_device:
        return []  # on a GPU run, device allocations are memory_churn's, from the allocator events
    rows = ctx.store.dicts(f"""
        SELECT h.window_index AS window, h.step, h.name, h.dur_ns, h.input_dims FROM host_ops h
        WHERE h.step IS NOT NULL AND h.category = 'cpu_op' AND regexp_matches(h.name, '{FACTORY_OP_REGEX}')
          AND NOT {UNDER_FACTORY_SQL}""")
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
    top = sorted(ops.values(), key=lambda o: -o["total_ns"])
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
