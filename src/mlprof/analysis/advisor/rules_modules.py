"""Rule: one nn.Module (a call site in the model) holding a large share of step time.

A hand-written layer is often many small ops, none dominant alone (seed 002's
dropout was a random-number call plus masking); summing the self time of all
ops run inside the module finds it anyway, with the backward of those ops
(``backward_links``: a node counts where the forward op that created it ran).
Needs ``with_stack=True``, which records the ``nn.Module: Name_i`` frames.
"""

from __future__ import annotations

from mlprof.analysis.advisor.context import AdvisorContext
from mlprof.analysis.op_call_sites import innermost_sql
from mlprof.analysis.advisor.model import Evidence, Finding, Thresholds, severity_for
from mlprof.analysis.advisor.rules_host import EXPECTED_COMPUTE
from mlprof.tables.names import MODULE_FRAME_PREFIX, module_frame_sql

__all__ = ["dominant_module"]


def dominant_module(ctx: AdvisorContext, th: Thresholds) -> list[Finding]:
    if not ctx.total_step_ns:
        return []
    has_modules = ctx.store.rows("SELECT count(*) FROM host_ops WHERE category = 'python_function' "
                                 f"AND {module_frame_sql()} AND step IS NOT NULL")[0][0]
    if not has_modules:
        return []
    rows = ctx.store.dicts(f"""
        -- A backward op is placed where the forward op that created its node ran (backward_links): its
        -- time is the module's whose forward made it, on whichever thread the engine ran it.
        WITH o AS (SELECT h.op_id, h.window_index, h.step, coalesce(b.forward_tid, h.tid) AS tid,
                          coalesce(b.forward_start_ns, h.start_ns) AS start_ns,
                          coalesce(b.forward_start_ns, h.start_ns + h.dur_ns) AS end_ns, h.name, h.folded_self_ns
                   FROM host_ops h LEFT JOIN backward_links b ON b.op_id = h.op_id AND b.forward_op_id IS NOT NULL
                   WHERE h.category = 'cpu_op' AND NOT coalesce(h.folded, false) AND h.step IS NOT NULL),
        m AS (SELECT window_index, tid, start_ns, start_ns + dur_ns AS end_ns, name FROM host_ops
              WHERE category = 'python_function' AND {module_frame_sql()} AND step IS NOT NULL),
        inner_most AS (
            SELECT o.op_id, o.window_index, o.step, o.name AS op, o.folded_self_ns,
                   {innermost_sql("m")} AS module
            FROM o JOIN m ON m.window_index = o.window_index AND m.tid = o.tid
                 AND m.start_ns <= o.start_ns AND m.end_ns >= o.end_ns
            GROUP BY o.op_id, o.window_index, o.step, o.name, o.folded_self_ns)
        SELECT module, op, window_index, step, count(*) AS count, sum(folded_self_ns) AS self_ns FROM inner_most
        GROUP BY module, op, window_index, step""")
    modules: dict[str, dict] = {}
    for r in rows:
        m = modules.setdefault(r["module"], {"module": r["module"], "self_ns": 0, "compute_ns": 0, "ops": {},
                                             "per_step": {}})
        ns = r["self_ns"] or 0
        m["self_ns"] += ns
        if EXPECTED_COMPUTE.match(r["op"]):
            m["compute_ns"] += ns
        op = m["ops"].setdefault(r["op"], {"name": r["op"], "count": 0, "self_ns": 0})
        op["count"] += r["count"]
        op["self_ns"] += ns
        key = (r["window_index"], r["step"])
        m["per_step"][key] = m["per_step"].get(key, 0) + ns
    findings = []
    for m in sorted(modules.values(), key=lambda m: (-m["self_ns"], m["module"]))[:3]:
        share = ctx.share(m["self_ns"])
        if share < th.dominant_op_warn_share:
            break
        # Judged without the module's worst step: one preempted call must not make a culprit.
        judged = ctx.robust_share(lambda st: m["per_step"].get((st.window, st.step), 0))
        if judged < th.dominant_op_warn_share:
            continue
        compute_bound = m["compute_ns"] >= 0.5 * m["self_ns"]
        # A Linear/Conv layer spending its time in its matmul is doing its job.
        severity = "info" if compute_bound else severity_for(judged, th.dominant_op_warn_share, th)
        name = m["module"].removeprefix(f"{MODULE_FRAME_PREFIX} ")
        ops = sorted(m["ops"].values(), key=lambda o: (-(o["self_ns"] or 0), o["name"]))[:8]
        findings.append(Finding(
            id="dominant_module", severity=severity, share=round(share, 4), impact_ns=int(m["self_ns"]),
            title=f"Module {name} takes {share:.0%} of step time (its forward ops' self time and their backward's)",
            evidence=Evidence(metrics={"module": m["module"], "self_ns": m["self_ns"],
                                       "dense_math_ns": m["compute_ns"], "total_step_ns": ctx.total_step_ns},
                              ops=ops, call_sites=[{"call_site": None, "module": m["module"],
                                                    "self_ns": m["self_ns"]}]),
            fix=(f"{name} is compute-bound on dense math; see the dominant op advice." if compute_bound else
                 f"Rewrite {name}'s forward with built-in or fused ops (torch.nn.functional.* has dropout, "
                 "norms, activations and attention), avoid float64/Python loops/CPU fallbacks in it, and "
                 f"check its ops' shapes with `mlprof op PATH --name {ops[0]['name']}`."),
            rank=ctx.rank))
    return findings
