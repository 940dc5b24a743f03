"""Host-bound op storms: a Python loop issuing many tiny ops per step.

A loop over rows or samples turns one tensor operation into hundreds of
framework calls. Each call costs microseconds of dispatch. The time is
spread over many op types, so no single op dominates, and mixed precision
does not help: the host is launching work, not computing. The rule looks for
op names called at least ``op_storm_calls_per_step`` times per step at under
``tiny_op_ns`` each. It counts the outermost of them once, plus the short
Python gaps between consecutive ones (the loop itself), and the backward those ops caused (linked by autograd sequence number,
docs/attribution.md), whatever thread and however many intra-op threads ran it.
It then names the line that loops, from the sampled Python stacks.
The fix follows the phase that holds the storm's time (:func:`storm_fix`): the
optimizer's per-tensor loop and the input pipeline's per-sample work have fixes of their own.
"""

from __future__ import annotations


from mlprof.analysis.advisor.context import AdvisorContext
from mlprof.analysis.advisor.model import Evidence, Finding, Thresholds, severity_for
from mlprof.analysis.advisor.loops import loop_site, storm_ops
from mlprof.analysis.advisor.rules_host import short_site

__all__ = ["op_storm", "storm_fix"]

_FIX = ("Vectorise the loop: one tensor op over the whole batch instead of one per row or sample (a mask from "
        "torch.bernoulli(torch.full_like(x, p)), model(x) on the batch instead of model(x[i:i+1]), torch.vmap for "
        "per-sample functions), or torch.compile the function so its small ops fuse. Mixed precision or a "
        "faster device will not help: the time goes to issuing ops, not to arithmetic.")


_FRAMEWORK_FIX = ("The model is made of many small ops that the host issues one by one (views, transposes, "
                  "small copies inside each layer or per parameter). Fuse them: torch.compile the model (on a GPU, "
                  "mode='reduce-overhead' adds CUDA graphs), use fused implementations "
                  "(F.scaled_dot_product_attention, fused optimizers, DDP's gradient_as_bucket_view=True), or give "
                  "each op more work (a larger batch or sequence). There is no Python loop to vectorise.")

_OPTIMIZER_FIX = ("The optimizer updates its parameters one tensor at a time, several small ops each. Use its "
                  "multi-tensor or fused implementation (torch.optim.AdamW(params, foreach=True), or fused=True "
                  "where your device and torch support it), or torch.compile the optimizer step; fewer, larger "
                  "parameter tensors help too. Mixed precision will not help: the time goes to issuing ops.")


_DATA_LOADING_FIX = ("The tiny ops run while the next batch is loaded, not in the model: the dataset's __getitem__, "
                     "its transforms or the collate function build each sample with many small tensor ops. Take "
                     "that work off the training step: DataLoader(num_workers=N, persistent_workers=True) runs it "
                     "in worker processes beside training; build each batch with one tensor op (index a tensor "
                     "prepared once with a batch of indices) instead of one per sample; or prepare the tensors "
                     "once, before training. Vectorising or compiling the model will not help: these are not its ops.")


def storm_fix(phases: dict[str, int], framework: bool) -> tuple[str, str]:
    """(where, fix) for a storm whose outermost ops' time per host phase is ``phases``.

    The fix follows the storm's own evidence: the phase that holds at least half of its time decides
    (the optimizer's per-tensor loop, or the input pipeline's per-sample work); else the storm is the
    model's, a Python loop around it (``framework=False``) or its own small ops (``framework=True``).
    """
    total_ns = sum(phases.values())
    if phases.get("optimizer", 0) >= 0.5 * total_ns > 0:
        return " in the optimizer step", _OPTIMIZER_FIX
    if phases.get("data_loading", 0) >= 0.5 * total_ns > 0:
        return " in data loading", _DATA_LOADING_FIX
    return "", _FRAMEWORK_FIX if framework else _FIX


def _storm_phases(ctx: AdvisorContext) -> dict[str, int]:
    """Storm-op time (outermost storm ops) per host phase, largest first."""
    # A window's host spans do not overlap: the span an op starts in is the last one starting before it, an
    # ASOF join (sorted, linear). The range join took 219 s on 355K events (a per-element .item() loop).
    rows = ctx.store.rows("""
        SELECT ps.phase, sum(o.end_ns - o.start_ns) FROM _storm_ops o
        ASOF JOIN (SELECT window_index, phase, start_ns, end_ns FROM phase_spans WHERE view = 'host') ps
          ON ps.window_index = o.window_index AND o.start_ns >= ps.start_ns
        WHERE o.start_ns < ps.end_ns
        GROUP BY ps.phase ORDER BY 2 DESC, 1""")
    return {phase: int(ns) for phase, ns in rows}


def _storm_backward(ctx: AdvisorContext, th: Thresholds) -> dict[tuple, int]:
    """Backward time the storm's forward ops caused, per (window, step, forward thread): the autograd
    nodes they created (``backward_links``; the ops inside a node, such as the ``aten::add_`` that
    accumulates the 64 per-sample gradients of a weight, are the node's time), plus the short gaps
    between two such nodes (the engine's own work between them), on whichever thread ran them."""
    rows = ctx.store.rows(f"""
        WITH nodes AS (
            SELECT h.window_index, h.step, h.tid, h.start_ns, h.start_ns + h.dur_ns AS end_ns,
                   b.forward_tid, b.forward_start_ns
            FROM backward_links b JOIN host_ops h ON h.op_id = b.op_id
            WHERE b.op_id = b.node_op_id AND h.step IS NOT NULL),
        flagged AS (
            -- A node is the storm's when the forward op that created it ran inside a storm op (or is one).
            SELECT n.*, coalesce(n.forward_start_ns < s.end_ns, false) AS from_storm
            FROM nodes n ASOF LEFT JOIN _storm_ops s
              ON s.window_index = n.window_index AND s.tid = n.forward_tid AND n.forward_start_ns >= s.start_ns),
        ordered AS (
            SELECT *, lag(end_ns) OVER w AS prev_end_ns, lag(from_storm) OVER w AS prev_from_storm FROM flagged
            WINDOW w AS (PARTITION BY window_index, step, tid ORDER BY start_ns))
        SELECT window_index, step, forward_tid,
               sum(end_ns - start_ns + CASE WHEN prev_from_storm AND start_ns >= prev_end_ns
                                             AND start_ns - prev_end_ns < {int(th.op_storm_gap_ns)}
                                        THEN start_ns - prev_end_ns ELSE 0 END)
        FROM ordered WHERE from_storm GROUP BY ALL""")
    return {(w, step, tid): int(ns) for w, step, tid, ns in rows}


def _storm_cost(ctx: AdvisorContext, th: Thresholds) -> tuple[int, list[dict]]:
    """Time in storm ops (outermost only) plus the Python time of the short gaps between them (the loop
    itself), plus the backward those ops caused (:func:`_storm_backward`); the envelopes per step/thread.

    A gap's time spent inside other ops (the matmul between two layers' tiny transposes) is the
    model's work, not the loop's: only the part no top-level op covers counts.

    That part is F(gap end) - F(gap start), with F(t) the time top-level ops on the thread have run
    by t, summed over ops: (ops started by t) x t - (their starts) - ((ops ended by t) x t - (their
    ends)), read from running counts and sums by two ASOF joins a bound. A join of gaps with the ops
    overlapping them took minutes on a 10M-event run, where every gap meets every op of its thread.
    """
    rows = ctx.store.dicts(f"""
        WITH ops AS (SELECT * FROM _storm_ops),
        gaps AS (
            SELECT window_index, step, tid,
                   lag(end_ns) OVER (PARTITION BY window_index, step, tid ORDER BY start_ns) AS gap_start_ns,
                   start_ns AS gap_end_ns
            FROM ops),
        short_gaps AS (
            SELECT row_number() OVER () AS gap_id, * FROM gaps
            WHERE gap_end_ns > gap_start_ns AND gap_end_ns - gap_start_ns < {int(th.op_storm_gap_ns)}),
        top_ops AS (
            SELECT h.window_index, h.tid, h.start_ns, h.start_ns + h.dur_ns AS end_ns FROM host_ops h
            LEFT JOIN host_ops p ON p.op_id = h.parent_op_id
            WHERE h.step IS NOT NULL AND h.category = 'cpu_op' AND (p.op_id IS NULL OR p.category <> 'cpu_op')
              AND (h.window_index, h.tid) IN (SELECT DISTINCT window_index, tid FROM short_gaps)),
        starts AS (
            SELECT window_index, tid, start_ns AS at_ns, count(*) OVER w AS n, sum(start_ns) OVER w AS total
            FROM top_ops WINDOW w AS (PARTITION BY window_index, tid ORDER BY start_ns)),
        ends AS (
            SELECT window_index, tid, end_ns AS at_ns, count(*) OVER w AS n, sum(end_ns) OVER w AS total
            FROM top_ops WINDOW w AS (PARTITION BY window_index, tid ORDER BY end_ns)),
        bounds AS (
            SELECT gap_id, window_index, tid, gap_start_ns AS at_ns, -1 AS sign FROM short_gaps
            UNION ALL SELECT gap_id, window_index, tid, gap_end_ns, 1 FROM short_gaps),
        run_by AS (
            SELECT b.gap_id, b.sign,
                   coalesce(s.n, 0) * CAST(b.at_ns AS HUGEINT) - coalesce(s.total, 0)
                   - (coalesce(e.n, 0) * CAST(b.at_ns AS HUGEINT) - coalesce(e.total, 0)) AS ran_ns
            FROM bounds b
            ASOF LEFT JOIN starts s ON s.window_index = b.window_index AND s.tid = b.tid AND b.at_ns > s.at_ns
            ASOF LEFT JOIN ends e ON e.window_index = b.window_index AND e.tid = b.tid AND b.at_ns > e.at_ns),
        covered AS (SELECT gap_id, sum(sign * ran_ns) AS covered_ns FROM run_by GROUP BY gap_id),
        gap_python AS (
            SELECT g.window_index, g.step, g.tid,
                   sum(g.gap_end_ns - g.gap_start_ns - coalesce(c.covered_ns, 0)) AS python_ns
            FROM short_gaps g LEFT JOIN covered c USING (gap_id)
            GROUP BY ALL),
        op_time AS (
            SELECT window_index, step, tid, min(start_ns) AS start_ns, max(end_ns) AS end_ns,
                   sum(end_ns - start_ns) AS op_ns
            FROM ops GROUP BY ALL)
        SELECT o.window_index, o.step, o.tid, o.start_ns, o.end_ns,
               o.op_ns + greatest(coalesce(g.python_ns, 0), 0) AS cost_ns
        FROM op_time o LEFT JOIN gap_python g
          ON g.window_index = o.window_index AND g.step = o.step AND g.tid = o.tid
        ORDER BY o.window_index, o.step, o.tid""")
    backward = _storm_backward(ctx, th)
    for r in rows:
        r["backward_ns"] = backward.get((r["window_index"], r["step"], r["tid"]), 0)
        r["cost_ns"] = int(r["cost_ns"]) + r["backward_ns"]
    return sum(int(r["cost_ns"]) for r in rows), rows


def _with_cost(site: dict | None, cost_ns: int) -> list[dict]:
    return [{**site, "self_ns": int(cost_ns * site["share_of_samples"])}] if site else []


def op_storm(ctx: AdvisorContext, th: Thresholds) -> list[Finding]:
    """Many tiny ops per step from a Python loop (see the module doc)."""
    if not ctx.steps:
        return []
    storm_ops(ctx, th)
    cost_ns, envelopes = _storm_cost(ctx, th)
    share = ctx.share(cost_ns)
    severity = severity_for(share, th.op_storm_warn_share, th)
    hidden = None  # the launch-bound idle share, when the device's work hides the loop
    if severity in ("critical", "warning") and ctx.has_device:
        # On a device run the host issuing tiny ops only costs time when the device waits for them:
        # with little launch-bound idle the kernels hide the loop (ResNet's 500 aten::empty a step).
        launch_idle = ctx.share(sum(s.idle_launch_ns or 0 for s in ctx.steps))
        if launch_idle < th.device_idle_warn_share:
            severity, hidden = "info", launch_idle
    if severity is None or share < th.info_share:
        return []
    steps_n = max(len(ctx.steps), 1)
    repeated = ctx.store.dicts("""
        SELECT name, calls, round(calls / steps, 1) AS calls_per_step, CAST(avg_ns AS BIGINT) AS avg_ns
        FROM _storm_names ORDER BY calls DESC, name LIMIT 8""")
    modules = ctx.store.dicts(f"""
        SELECT module_path, any_value(module_type) AS module_type, min(depth) AS depth, count(*) AS calls,
               round(count(*) / count(DISTINCT (window_index, step)), 1) AS calls_per_step
        FROM module_calls WHERE step IS NOT NULL GROUP BY module_path
        HAVING count(*) >= {int(th.op_storm_calls_per_step)} * count(DISTINCT (window_index, step))
        ORDER BY calls DESC, min(depth), module_path LIMIT 3""")
    site = loop_site(ctx, envelopes, modules[0]["depth"] if modules else None)
    ops_per_step = ctx.store.rows("SELECT count(*) FROM host_ops WHERE step IS NOT NULL AND category = 'cpu_op'")[0][0]
    what = (f"{modules[0]['module_path']} ({modules[0]['module_type']}) is called {modules[0]['calls_per_step']:g} "
            f"times per step" if modules else
            f"{repeated[0]['name']} runs {repeated[0]['calls_per_step']:g} times per step" if repeated else "")
    phases = _storm_phases(ctx)
    phase_where, _ = storm_fix(phases, framework=False)
    in_phase = bool(phase_where)  # the optimizer's or the input pipeline's: not the model's own ops
    where = phase_where or (f" from {short_site(site['call_site'])}" if site else "")
    # Storm ops nested in other framework ops are the model's own small ops, not a Python loop's, unless a
    # module is called that often (a per-sample loop around it) or the storm is the optimizer's per-tensor
    # loop. On a device run the launch-bound idle (device_idle) is then the finding, this is its detail.
    total_ns, inside_ns = ctx.store.rows(
        "SELECT sum(end_ns - start_ns), sum(CASE WHEN inside_op THEN end_ns - start_ns ELSE 0 END) FROM _storm_named")[0]
    inside_share = (inside_ns or 0) / total_ns if total_ns else 0.0
    framework = inside_share >= th.op_storm_inside_ops_share and not modules and not in_phase
    if framework and ctx.has_device and severity in ("critical", "warning"):
        severity = "info"
    _, fix = storm_fix(phases, framework)
    if framework:
        title = (f"Host-bound: {share:.0%} of step time issues tiny framework ops ({what}), {inside_share:.0%} of it "
                 "inside larger ops: the model's own small ops, not a Python loop")
    else:
        title = f"Host-bound Python loop: {share:.0%} of step time issues tiny ops one by one ({what}{where})"
    if hidden is not None:
        # Said in the title: "Host-bound Python loop, 26% of step time" beside a 97% busy GPU read as a
        # contradiction; the loop's time runs while the device works, and costs the step only what it idles.
        title += (f"; hidden behind the device's work (it idles waiting for launches {hidden:.0%} of step "
                  "time)")
    return [Finding(
        id="op_storm", severity=severity, share=round(share, 4), impact_ns=int(cost_ns),
        title=title,
        evidence=Evidence(
            metrics={"storm_ns": cost_ns, "backward_ns": sum(e["backward_ns"] for e in envelopes),
                     "total_step_ns": ctx.total_step_ns,
                     "ops_per_step": round(ops_per_step / steps_n, 1), "repeated_op_names": len(repeated),
                     "storm_ns_by_phase": phases, "inside_framework_ops_share": round(inside_share, 4)},
            ops=repeated, call_sites=_with_cost(site, cost_ns),
            steps=sorted(({"step": e["step"], "window": e["window_index"], "value_ns": int(e["cost_ns"])}
                          for e in envelopes), key=lambda r: -r["value_ns"])[:5]),
        fix=fix, rank=ctx.rank)]
