"""Rules about host-side time: dominant op, input pipeline, GC, step outliers."""

from __future__ import annotations

import re
import statistics

from mlprof.analysis.steps import HOST_FIELDS
from mlprof.analysis.advisor.context import AdvisorContext
from mlprof.analysis.advisor.model import Evidence, Finding, Thresholds, severity_for
from mlprof.analysis.ops import DEVICE_NS_PER_OP

__all__ = ["dominant_op", "data_loading", "gc_pauses", "step_outliers", "host_outside_ops"]

# Dense math that is supposed to dominate a training step: when one of these
# leads, the model is compute-bound, which is the healthy state (info only).
EXPECTED_COMPUTE = re.compile(
    r"^aten::(mm|addmm|bmm|baddbmm|addbmm|matmul|linear|einsum|_?convolution\w*|conv\w*|cudnn_convolution\w*|"
    r"mkldnn_convolution\w*|miopen_convolution\w*|_?scaled_dot_product\w*|_flash_attention\w*|"
    r"_efficient_attention\w*)$")

# Ops that are not "the model's ops" for this rule: step spans, optimizer and
# DataLoader annotations have their own rules.
_OP_FILTER = ("category = 'cpu_op' AND NOT coalesce(folded, false) AND step IS NOT NULL "
              "AND name NOT LIKE 'ProfilerStep#%' AND name NOT LIKE 'enumerate(DataLoader)%'")


def dominant_op(ctx: AdvisorContext, th: Thresholds) -> list[Finding]:
    """One op type holding a large share of step time (seed 002: a slow dropout at 76%).

    Cost of an op type = its host self time, or the device time of the kernels it
    launched when larger (a GPU op is as slow as its kernels).
    """
    if not ctx.total_step_ns:
        return []
    rows = ctx.store.dicts(f"""
        {DEVICE_NS_PER_OP}
        SELECT h.name, count(*) AS count, sum(h.folded_self_ns) AS host_self_ns,
               coalesce(sum(d.device_ns), 0) AS device_ns, count(DISTINCT h.step) AS steps
        FROM (SELECT * FROM host_ops WHERE {_OP_FILTER}) h LEFT JOIN dev d ON d.host_op_id = h.op_id
        GROUP BY h.name""")
    for r in rows:
        r["cost_ns"] = max(r["host_self_ns"] or 0, r["device_ns"] or 0)
    rows.sort(key=lambda r: -r["cost_ns"])
    findings = []
    for top in rows[:3]:
        share = ctx.share(top["cost_ns"])
        if share < th.dominant_op_warn_share:
            break  # sorted: the rest are smaller
        expected = bool(EXPECTED_COMPUTE.match(top["name"]))
        per_step = ctx.store.dicts(f"""
            SELECT window_index AS window, step, sum(folded_self_ns) AS self_ns FROM host_ops
            WHERE name = ? AND {_OP_FILTER} GROUP BY 1, 2 ORDER BY self_ns DESC""", [top["name"]])
        judged = share
        if top["host_self_ns"] >= top["device_ns"]:
            # Host-timed: judge without the op's worst step, so one preempted call is not a culprit.
            by_step = {(r["window"], r["step"]): r["self_ns"] or 0 for r in per_step}
            judged = ctx.robust_share(lambda st: by_step.get((st.window, st.step), 0))
        if judged < th.dominant_op_warn_share:
            continue
        # Dense math leading the step is what a healthy, compute-bound run looks like.
        severity = "info" if expected else severity_for(judged, th.dominant_op_warn_share, th)
        sites = ctx.call_sites(f"name = ? AND {_OP_FILTER}", [top["name"]])
        shapes = ctx.store.dicts(f"""
            SELECT input_dims, input_types, count(*) AS count, sum(folded_self_ns) AS self_ns FROM host_ops
            WHERE name = ? AND {_OP_FILTER} GROUP BY 1, 2 ORDER BY self_ns DESC LIMIT 3""", [top["name"]])
        # float64 is the classic slow path (seed 002's dropout drew doubles): say so when it is there.
        slow_dtype = next((t for t in ("double", "c10::complex<double>")
                           if shapes and t in str(shapes[0]["input_types"] or "").lower()), None)
        where = f" called from {sites[0]['call_site'] or sites[0]['module']}" if sites and (
            sites[0]["call_site"] or sites[0]["module"]) else ""
        fix = (f"{top['name']} is dense math leading the step: the run is compute-bound. Gains come from "
               "less work (smaller shapes, fewer FLOPs), lower precision (bf16/AMP, TF32) or fused kernels."
               if expected else
               f"Look at why {top['name']}{where} is so expensive: a hand-written or unoptimised op "
               "(seed 002's dropout) usually has a built-in or fused equivalent (torch.nn.functional.*), "
               "a cheaper algorithm, or runs on a slow path (float64, CPU fallback, Python loop). Check it "
               "with `mlprof op PATH --name " + top["name"] + "` for the shapes involved.")
        findings.append(Finding(
            id="dominant_op", severity=severity, share=round(share, 4), impact_ns=int(top["cost_ns"]),
            title=f"{top['name']} takes {share:.0%} of step time{where}"
                  + (f" (on {slow_dtype} inputs)" if slow_dtype and not expected else ""),
            evidence=Evidence(
                metrics={"op": top["name"], "count": top["count"], "host_self_ns": top["host_self_ns"],
                         "device_ns": top["device_ns"], "total_step_ns": ctx.total_step_ns,
                         "expected_compute": expected, "slow_dtype": slow_dtype,
                         "input_shapes": [{"input_dims": r["input_dims"], "input_types": r["input_types"],
                                           "count": r["count"], "self_ns": r["self_ns"]} for r in shapes]},
                steps=per_step[:5], ops=[{k: r[k] for k in ("name", "count", "host_self_ns", "device_ns", "cost_ns")}
                                     for r in rows[:5]],
                call_sites=sites),
            fix=fix, rank=ctx.rank))
    return findings


def data_loading(ctx: AdvisorContext, th: Thresholds) -> list[Finding]:
    """Steps waiting for input: time in DataLoader iteration inside the step."""
    wait_ns = sum(s.data_loading_ns for s in ctx.steps)
    share = ctx.share(wait_ns)
    severity = severity_for(ctx.robust_share(lambda s: s.data_loading_ns), th.data_loading_warn_share, th)
    if severity is None:
        return []
    loaders = ctx.store.dicts("""
        SELECT name, count(*) AS count, sum(dur_ns) AS total_ns FROM host_ops
        WHERE step IS NOT NULL AND name LIKE 'enumerate(DataLoader)%' GROUP BY name ORDER BY total_ns DESC""")
    single = any("_SingleProcessDataLoaderIter" in r["name"] for r in loaders)
    # pin_memory only speeds up host-to-device copies: no such advice on CPU-only runs.
    pin = ", pin_memory=True" if ctx.has_device else ""
    fix = (f"Load batches in worker processes: DataLoader(num_workers=N{pin}, "
           "persistent_workers=True, prefetch_factor=2+); the loader here runs in the training process "
           "(num_workers=0), so every item is read and collated between steps."
           if single else
           "Give the DataLoader more workers or a larger prefetch_factor, make __getitem__ cheaper "
           "(pre-decoded/cached data, vectorised transforms)"
           + (", and use pin_memory=True for device copies." if ctx.has_device else "."))
    return [Finding(
        id="data_loading", severity=severity, share=round(share, 4), impact_ns=int(wait_ns),
        title=f"Input-bound: {share:.0%} of step time waits for the next batch",
        evidence=Evidence(metrics={"data_loading_ns": wait_ns, "total_step_ns": ctx.total_step_ns,
                                   "single_process_loader": single},
                          steps=ctx.step_rows(lambda s: s.data_loading_ns)[:5], ops=loaders,
                          call_sites=ctx.phase_call_sites("data_loading")),
        fix=fix, rank=ctx.rank)]


def gc_pauses(ctx: AdvisorContext, th: Thresholds) -> list[Finding]:
    """Python garbage-collector pauses inside steps (needs gc_detect_threshold)."""
    rows = ctx.store.dicts("""
        SELECT generation, count(*) AS count, sum(dur_ns) AS total_ns, max(dur_ns) AS max_ns,
               sum(collected) AS collected
        FROM gc_pauses WHERE step IS NOT NULL GROUP BY generation ORDER BY generation""")
    pause_ns = sum(r["total_ns"] for r in rows)
    share = ctx.share(pause_ns)
    severity = severity_for(share, th.gc_warn_share, th)
    if severity is None:
        return []
    per_step = ctx.store.dicts("""
        SELECT window_index AS window, step, count(*) AS count, sum(dur_ns) AS pause_ns, max(dur_ns) AS max_ns
        FROM gc_pauses WHERE step IS NOT NULL GROUP BY 1, 2 ORDER BY pause_ns DESC LIMIT 5""")
    full = next((r for r in rows if r["generation"] == 2), None)
    steps_n = max(len(ctx.steps), 1)
    hint = ""
    if full and full["count"] >= steps_n:
        hint = (f" Full (generation 2) collections run {full['count'] / steps_n:.1f} times per step: "
                "an explicit gc.collect() in the loop, or a large heap of long-lived objects, is likely.")
    return [Finding(
        id="gc_pauses", severity=severity, share=round(share, 4), impact_ns=int(pause_ns),
        title=f"Python GC pauses take {share:.0%} of step time",
        evidence=Evidence(metrics={"pause_ns": pause_ns, "total_step_ns": ctx.total_step_ns,
                                   "pauses": sum(r["count"] for r in rows)},
                          steps=per_step, ops=[{"name": f"gc generation {r['generation']}", **r} for r in rows],
                          call_sites=ctx.phase_call_sites("gc")),
        fix=("Call gc.freeze() after model/data set-up so long-lived objects leave the collector's scans, "
             "drop gc.collect() calls from the training loop (or run them every N steps), avoid creating "
             "reference cycles per step, or raise gc.set_threshold()." + hint),
        rank=ctx.rank)]


def step_outliers(ctx: AdvisorContext, th: Thresholds) -> list[Finding]:
    """Steps much slower than the median step."""
    if len(ctx.steps) < 3:
        return []
    median = statistics.median(s.dur_ns for s in ctx.steps)
    slow = [s for s in ctx.steps if s.dur_ns > th.step_outlier_ratio * median]
    if not slow:
        return []
    excess_ns = sum(s.dur_ns - median for s in slow)
    share = ctx.share(excess_ns)
    severity = severity_for(share, th.step_outlier_warn_share, th)
    if severity is None:
        return []
    if len(slow) < th.step_outlier_min_count:
        severity = "info"
    # Which part of the step grew: each outlier's columns against the median of all steps.
    parts = tuple(HOST_FIELDS.values())
    typical = {p: statistics.median(getattr(s, p) for s in ctx.steps) for p in parts}
    steps = []
    for s in sorted(slow, key=lambda s: -s.dur_ns):
        grown = max(parts, key=lambda p: getattr(s, p) - typical[p])
        steps.append({"step": s.step, "window": s.window, "dur_ns": s.dur_ns,
                      "ratio_to_median": round(s.dur_ns / median, 2), **{p: getattr(s, p) for p in parts},
                      "free_ns": s.free_ns, "grew_most": grown.removesuffix("_ns"),
                      "grew_most_by_ns": int(getattr(s, grown) - typical[grown])})
    return [Finding(
        id="step_outliers", severity=severity, share=round(share, 4), impact_ns=int(excess_ns),
        title=f"{len(slow)} of {len(ctx.steps)} steps take over {th.step_outlier_ratio:g}x the median "
              f"step ({median / 1e6:.2f} ms)",
        evidence=Evidence(metrics={"median_step_ns": int(median), "outliers": len(slow),
                                   "excess_ns": int(excess_ns)}, steps=steps[:10]),
        fix=("Compare an outlier step with a typical one (`mlprof compare` on two captures, or the timeline): "
             "periodic work (checkpointing, evaluation, logging, GC, recompilation, data loader refills) "
             "or interference from other processes makes single steps slow; move it off the step or spread it."),
        rank=ctx.rank)]


def host_outside_ops(ctx: AdvisorContext, th: Thresholds) -> list[Finding]:
    """Step time in which no op runs on any thread: plain Python, sleeps, file or network I/O."""
    # The attribution's "python" phase: no op on the step's thread, no GC pause (own rule).
    outside_ns = sum(s.python_ns for s in ctx.steps)
    gc_ns = sum(s.gc_ns for s in ctx.steps)
    share = ctx.share(outside_ns)
    typical = ctx.robust_share(lambda s: s.python_ns)
    severity = severity_for(typical, th.host_outside_ops_warn_share, th)
    if severity is None or typical < th.host_outside_ops_warn_share:
        return []  # below the bar this is ordinary loop glue, not worth a line
    sites = ctx.phase_call_sites("python")
    where = f", mostly at {short_site(sites[0]['call_site'])}" if sites and sites[0]["share_of_phase"] >= 0.5 else ""
    fix = ("Move that work off the training loop or into a background thread: checkpoint writes every N steps "
           "(or asynchronously), logging and metrics every N steps, no time.sleep / queue.get / file reads "
           "between steps.")
    if not sites:
        fix = ("Find the Python doing it: `mlprof run` samples Python stacks by default (`mlprof callsites "
               "--phase python`); then " + fix[0].lower() + fix[1:])
    return [Finding(
        id="host_outside_ops", severity=severity, share=round(share, 4), impact_ns=int(outside_ns),
        title=f"{share:.0%} of step time runs no op at all (Python code, sleeps or I/O between ops){where}",
        evidence=Evidence(metrics={"outside_ops_ns": outside_ns, "gc_ns": gc_ns, "total_step_ns": ctx.total_step_ns},
                          steps=ctx.step_rows(lambda s: s.python_ns)[:5], call_sites=sites),
        fix=fix, rank=ctx.rank)]


def short_site(site: str) -> str:
    """'/long/path/train.py:76 checkpoint' -> 'train.py:76 checkpoint'."""
    path, _, rest = site.partition(":")
    return f"{path.rsplit('/', 1)[-1]}:{rest}"
