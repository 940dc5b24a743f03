"""Rules about host-side time: dominant op, input pipeline, GC, step outliers."""

from __future__ import annotations

import json
import re

from mlprof.analysis.advisor.rules_alloc import under_factory_sql
from mlprof.analysis.advisor.context import AdvisorContext
from mlprof.analysis.advisor.loops import backward_causes
from mlprof.analysis.advisor.rules_composite import composite_finding
from mlprof.analysis.advisor.model import Evidence, Finding, Thresholds, severity_for
from mlprof.analysis.ops import DEVICE_NS_PER_OP
from mlprof.tables.names import data_loader_kind, data_loading_sql, is_host_communication, step_span_sql

__all__ = ["dominant_op", "data_loading", "gc_pauses", "step_outliers", "host_outside_ops"]

# Dense math that is supposed to dominate a training step: when one of these
# leads, the model is compute-bound, which is the healthy state (info only).
EXPECTED_COMPUTE = re.compile(
    r"^aten::(mm|addmm|bmm|baddbmm|addbmm|matmul|linear|einsum|_?convolution\w*|conv\w*|cudnn_convolution\w*|"
    r"mkldnn_convolution\w*|miopen_convolution\w*|_?slow_conv\w*|thnn_conv\w*|_?scaled_dot_product\w*|"
    r"_flash_attention\w*|_efficient_attention\w*|_addmm_activation|mkldnn_linear\w*|"
    # Recurrent layers: their fused kernels are matrix products over time steps.
    r"_?lstm\w*|_?gru\w*|rnn_tanh\w*|rnn_relu\w*|mkldnn_rnn\w*|_cudnn_rnn\w*|miopen_rnn\w*|_thnn_fused_\w*)$")

# The ops of torch's standard layers, however they are called (nn.MaxPool2d or F.max_pool2d): the
# model's architecture, not a slow path, and there is no faster built-in to switch to. A healthy CNN on
# a CPU with fast matrix kernels spends a quarter of its step in pooling alone.
STANDARD_LAYER_OPS: tuple[tuple[str, re.Pattern], ...] = tuple((kind, re.compile(rf"^aten::({ops})$")) for kind, ops in (
    ("pooling", r"(max|avg|adaptive_max|adaptive_avg|fractional_max|lp)_pool\w*|max_unpool\w*"),
    ("normalisation", r"_?native_batch_norm\w*|_?batch_norm\w*|cudnn_batch_norm\w*|miopen_batch_norm\w*|"
                      r"native_layer_norm\w*|layer_norm|native_group_norm\w*|group_norm|instance_norm|"
                      r"_?fused_rms_norm\w*|rms_norm"),
    ("activation", r"relu\w*|threshold\w*|gelu\w*|silu\w*|sigmoid\w*|tanh\w*|hardswish\w*|hardtanh\w*|"
                   r"leaky_relu\w*|elu\w*|mish\w*|softplus\w*|glu\w*"),
    ("softmax", r"_?softmax\w*|_?log_softmax\w*"),
    ("embedding", r"embedding\w*"),
    ("dropout", r"dropout|native_dropout\w*|feature_dropout"),
    ("loss", r"nll_loss\w*|cross_entropy_loss|mse_loss\w*|binary_cross_entropy\w*|smooth_l1_loss\w*|"
             r"l1_loss\w*|kl_div\w*"),
    ("upsampling", r"_?upsample\w*"),
    ("recurrent", r"lstm|gru|rnn_tanh|rnn_relu|lstm_cell|gru_cell|rnn_tanh_cell|rnn_relu_cell|_thnn_fused_\w*"),
))

# host_outside_ops names a line when it holds this share of the Python phase's samples, else says why not.
NAMES_LINE_SHARE = 0.5


def standard_layer(op_name: str) -> str | None:
    """The kind of standard layer whose op ``op_name`` is (pooling, normalisation, ...), else None."""
    return next((kind for kind, pattern in STANDARD_LAYER_OPS if pattern.match(op_name)), None)


# Ops that are not "the model's ops" for this rule: step spans, optimizer and
# DataLoader annotations have their own rules.
_OP_FILTER = ("category = 'cpu_op' AND NOT coalesce(folded, false) AND step IS NOT NULL "
              f"AND NOT {step_span_sql()} AND NOT {data_loading_sql()}")


_STORM_FIX = ("Vectorise the loop (model(x) on the batch instead of model(x[i:i+1]), torch.vmap for per-sample "
              "functions) or torch.compile it: one graph's backward instead of one per iteration.")


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
        FROM (SELECT * FROM host_ops h WHERE {_OP_FILTER} AND NOT {under_factory_sql(ctx)}) h
             LEFT JOIN dev d ON d.host_op_id = h.op_id
        GROUP BY h.name""")
    # Collectives are communication_overlap's (their kernels are transfers and waits, not compute).
    comm = {n for (n,) in ctx.store.rows("""
        SELECT DISTINCT h.name FROM device_ops d JOIN host_ops h ON h.op_id = d.host_op_id
        WHERE d.is_communication AND h.step IS NOT NULL""")}
    rows = [r for r in rows if r["name"] not in comm and not is_host_communication(r["name"])]
    for r in rows:
        r["cost_ns"] = max(r["host_self_ns"] or 0, r["device_ns"] or 0)
    rows.sort(key=lambda r: (-r["cost_ns"], r["name"]))
    findings = []
    for top in rows[:3]:
        share = ctx.share(top["cost_ns"])
        if share < th.dominant_op_warn_share:
            break  # sorted: the rest are smaller
        expected = bool(EXPECTED_COMPUTE.match(top["name"]))
        device_timed = (top["device_ns"] or 0) > (top["host_self_ns"] or 0)
        # Per step in the measure the finding is about: a device-timed op's kernels (convolution_backward's
        # 212 ms showed its 2.3 ms of host self time per step as the evidence).
        per_step = ctx.store.dicts(f"""
            {DEVICE_NS_PER_OP}
            SELECT h.window_index AS window, h.step, sum(h.folded_self_ns) AS self_ns,
                   coalesce(sum(d.device_ns), 0) AS device_ns
            FROM (SELECT * FROM host_ops h WHERE name = ? AND {_OP_FILTER} AND NOT {under_factory_sql(ctx)}) h
                 LEFT JOIN dev d ON d.host_op_id = h.op_id
            GROUP BY 1, 2 ORDER BY {"device_ns" if device_timed else "self_ns"} DESC, 1, 2""", [top["name"]])
        for r in per_step:
            r["value_ns"] = int(r["device_ns"] if device_timed else r["self_ns"] or 0)
            r["measured_on"] = "device" if device_timed else "host"
        judged = share
        if not device_timed:
            # Host-timed: judge without the op's worst step, so one preempted call is not a culprit.
            by_step = {(r["window"], r["step"]): r["self_ns"] or 0 for r in per_step}
            judged = ctx.robust_share(lambda st: by_step.get((st.window, st.step), 0))
        if judged < th.dominant_op_warn_share:
            continue
        builtin = None if expected else _builtin_module(ctx, top["name"])
        layer = None if expected or builtin else _layer_of(ctx, top["name"])
        # Dense math leading the step is what a healthy, compute-bound run looks like; an op inside
        # torch's own nn layer (nn.Dropout's mask, nn.LayerNorm), or a standard layer called in its
        # functional form (F.max_pool2d), has no built-in to switch to.
        severity = "info" if expected or builtin or layer else severity_for(judged, th.dominant_op_warn_share, th)
        sites = (ctx.call_sites(f"name = ? AND {_OP_FILTER}", [top["name"]])
                 or ctx.sampled_call_sites(f"name = ? AND {_OP_FILTER}", [top["name"]]))
        shapes = ctx.store.dicts(f"""
            SELECT input_dims, input_types, count(*) AS count, sum(folded_self_ns) AS self_ns FROM host_ops
            WHERE name = ? AND {_OP_FILTER} GROUP BY 1, 2 ORDER BY self_ns DESC, 1, 2 LIMIT 3""", [top["name"]])
        # float64 is the classic slow path (seed 002's dropout drew doubles): say so when it is there.
        slow_dtype = next((t for t in ("double", "c10::complex<double>")
                           if shapes and t in str(shapes[0]["input_types"] or "").lower()), None)
        site = (sites[0].get("call_site") or sites[0].get("module")) if sites else None
        where = f" in torch's nn.{builtin}" if builtin else f" called from {site}" if site else ""
        # A backward op is charged to the forward op that created its autograd node, and to that op's line:
        # the backward's own line is only the `.backward()` call (docs/attribution.md).
        causes = backward_causes(ctx, th, f"name = ? AND {_OP_FILTER}", [top["name"]])
        in_loop = False
        if causes["backward_share"] >= 0.5 and causes["forward_ops"]:
            forward_site = causes["call_site"]
            site = forward_site["call_site"] if forward_site else None
            sites = [{"call_site": site, "samples": forward_site["samples"], "forward_op": causes["forward_ops"][0]["name"],
                      "self_ns": int(top["cost_ns"] * causes["backward_share"])}] if forward_site else []
            where = (f" in the backward of {causes['forward_ops'][0]['name']}"
                     + (f" called from {short_site(site)}" if site else ""))
            # The backward of a loop's many small graphs (a per-sample loop's weight gradients summed
            # by aten::add_ 64 times a step) is the loop's cost: op_storm's finding, not this op's.
            in_loop = causes["loop_share"] >= 0.5
            if in_loop:
                severity = "info"
        fix = (f"{top['name']} is the backward of a Python loop's many small graphs (it answers "
               f"{causes['forward_ops'][0]['name']}" + (f", run at {short_site(site)}" if site else "")
               + "): the loop is the cost (see op_storm). " + _STORM_FIX
               if in_loop else
               f"{top['name']} is dense math leading the step: the run is compute-bound. Gains come from "
               "less work (smaller shapes, fewer FLOPs), lower precision (bf16/AMP, TF32) or fused kernels."
               if expected else
               f"{top['name']} runs inside torch's own nn.{builtin}: there is no faster built-in to switch to. "
               "Its cost follows the tensors it touches (e.g. activation size for dropout and normalisation); "
               "reduce those, or fuse the layer with its neighbours (torch.compile)."
               if builtin else
               f"{top['name']} is a standard {layer} layer's op (called here in its functional form, "
               f"from {site or 'the model'}): there is no faster built-in to switch to. Its cost follows the "
               "tensors it touches; reduce those (smaller activations, channels_last for conv nets), or fuse "
               "the layer with its neighbours (torch.compile)."
               if layer else
               f"Look at why {top['name']}{where} is so expensive: a hand-written or unoptimised op "
               "(a hand-written dropout, say) usually has a built-in or fused equivalent (torch.nn.functional.*), "
               "a cheaper algorithm, or runs on a slow path (float64, CPU fallback, Python loop). Check it "
               "with `mlprof op PATH --name " + top["name"] + "` for the shapes involved.")
        findings.append(Finding(
            id="dominant_op", severity=severity, share=round(share, 4), impact_ns=int(top["cost_ns"]),
            title=f"{top['name']} takes {share:.0%} of step time{where}"
                  + (f" (on {slow_dtype} inputs)" if slow_dtype and not expected else ""),
            evidence=Evidence(
                metrics={"op": top["name"], "count": top["count"], "host_self_ns": top["host_self_ns"],
                         "device_ns": top["device_ns"], "total_step_ns": ctx.total_step_ns,
                         "expected_compute": expected, "slow_dtype": slow_dtype, "builtin_module": builtin,
                         "standard_layer": layer, "backward_share": round(causes["backward_share"], 4),
                         "forward_ops": causes["forward_ops"], "loop_backward_share": round(causes["loop_share"], 4),
                         "input_shapes": [{"input_dims": r["input_dims"], "input_types": r["input_types"],
                                           "count": r["count"], "self_ns": r["self_ns"]} for r in shapes]},
                steps=per_step[:5], ops=[{k: r[k] for k in ("name", "count", "host_self_ns", "device_ns", "cost_ns")}
                                     for r in rows[:5]],
                call_sites=sites),
            fix=fix, rank=ctx.rank))
    if not any(f.severity in ("critical", "warning") for f in findings):
        # No single op reached the bar: one call whose time is spread over the ops inside it may have.
        composite = composite_finding(ctx, th, rows, _OP_FILTER,
                                      lambda name: bool(EXPECTED_COMPUTE.match(name) or standard_layer(name)))
        if composite is not None:
            findings = [f for f in findings if f.evidence.metrics.get("op") != composite.evidence.metrics["op"]]
            findings.insert(0, composite)
    return findings


def _layer_of(ctx: AdvisorContext, op_name: str) -> str | None:
    """The standard layer ``op_name`` belongs to: its own (aten::max_pool2d_with_indices), else that of the op
    that calls it for most of its self time (aten::bernoulli_ drawing aten::dropout's mask in F.dropout, from a
    library's or generated code such as torch.fx's ``<eval_with_key>``, where no nn.Dropout module is seen)."""
    own = standard_layer(op_name)
    if own:
        return own
    rows = ctx.store.rows(f"""
        WITH o AS (SELECT window_index, parent_op_id, folded_self_ns FROM host_ops WHERE name = ? AND {_OP_FILTER})
        SELECT p.name, sum(o.folded_self_ns), (SELECT sum(folded_self_ns) FROM o)
        FROM o JOIN host_ops p ON p.window_index = o.window_index AND p.op_id = o.parent_op_id
        GROUP BY p.name ORDER BY 2 DESC, 1 LIMIT 1""", [op_name])
    if not rows or not rows[0][1] or not rows[0][2] or rows[0][1] < 0.5 * rows[0][2]:
        return None
    return standard_layer(rows[0][0])


def _builtin_module(ctx: AdvisorContext, op_name: str) -> str | None:
    """The torch.nn class (e.g. "Dropout") whose forward holds most of the op's self time, else None.

    Innermost recorded module call on the op's thread; needs record_modules (NULL class in older captures).
    """
    rows = ctx.store.rows(f"""
        WITH o AS (SELECT op_id, window_index, tid, start_ns, folded_self_ns FROM host_ops
                   WHERE name = ? AND {_OP_FILTER}),
        inner_most AS (
            SELECT o.op_id, any_value(o.folded_self_ns) AS ns,
                   arg_max(m.module_class_module, m.depth) AS cls, arg_max(m.module_type, m.depth) AS type
            FROM o JOIN module_calls m ON m.window_index = o.window_index AND m.tid = o.tid
             AND o.start_ns >= m.start_ns AND o.start_ns < m.end_ns
            GROUP BY o.op_id)
        SELECT type, sum(ns) FILTER (WHERE cls LIKE 'torch.%'), (SELECT sum(folded_self_ns) FROM o)
        FROM inner_most GROUP BY type ORDER BY 2 DESC NULLS LAST, type LIMIT 1""", [op_name])
    if not rows or not rows[0][1] or not rows[0][2]:
        return None
    type_name, builtin_ns, total_ns = rows[0]
    return type_name if builtin_ns >= 0.5 * total_ns else None


def data_loading(ctx: AdvisorContext, th: Thresholds) -> list[Finding]:
    """Steps waiting for input: time in DataLoader iteration inside the step."""
    wait_ns = sum(s.data_loading_ns for s in ctx.steps)
    share = ctx.share(wait_ns)
    loaders = ctx.store.dicts(f"""
        SELECT name, count(*) AS count, sum(dur_ns) AS total_ns FROM host_ops
        WHERE step IS NOT NULL AND {data_loading_sql()} GROUP BY name ORDER BY total_ns DESC, name""")
    kinds = {data_loader_kind(r["name"]) for r in loaders}
    single = "single_process" in kinds
    workers = "workers" in kinds and not single
    # With worker processes part of every wait is receiving the batch (unpickling, shared-memory
    # hand-off), which no worker count removes: a higher bar before calling the run input-bound.
    warn_share = th.data_loading_workers_warn_share if workers else th.data_loading_warn_share
    severity = severity_for(ctx.robust_share(lambda s: s.data_loading_ns), warn_share, th)
    if severity is None:
        return []
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
                                   "single_process_loader": single, "worker_processes": workers},
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
    # One full collection of torch's heap (50-200 ms) in a window of a few hundred short steps is a large
    # share of it, and says nothing of how often it comes: a rate needs more than one event. The finding
    # stands on the pauses that recur; one pause alone is a line.
    longest_ns = max(r["max_ns"] for r in rows)
    one_pause = severity_for(ctx.share(pause_ns - longest_ns), th.gc_warn_share, th) in (None, "info")
    if one_pause:
        severity = "info"
    per_step = ctx.store.dicts("""
        SELECT window_index AS window, step, count(*) AS count, sum(dur_ns) AS pause_ns, max(dur_ns) AS max_ns
        FROM gc_pauses WHERE step IS NOT NULL GROUP BY 1, 2 ORDER BY pause_ns DESC, 1, 2 LIMIT 5""")
    full = next((r for r in rows if r["generation"] == 2), None)
    steps_n = max(len(ctx.steps), 1)
    hint = ""
    if full and full["count"] >= steps_n:
        hint = (f" Full (generation 2) collections run {full['count'] / steps_n:.1f} times per step: "
                "an explicit gc.collect() in the loop, or a large heap of long-lived objects, is likely.")
    return [Finding(
        id="gc_pauses", severity=severity, share=round(share, 4), impact_ns=int(pause_ns),
        title=f"Python GC pauses take {share:.0%} of step time" + (
            f", most of it one pause of {longest_ns / 1e6:.0f} ms: one event in {len(ctx.steps)} steps gives no "
            "rate (record a longer window to see how often it comes)" if one_pause else ""),
        evidence=Evidence(metrics={"pause_ns": pause_ns, "total_step_ns": ctx.total_step_ns,
                                   "pauses": sum(r["count"] for r in rows), "longest_pause_ns": longest_ns,
                                   "one_pause": one_pause},
                          steps=per_step, ops=[{"name": f"gc generation {r['generation']}", **r} for r in rows],
                          call_sites=ctx.phase_call_sites("gc")),
        fix=("Call gc.freeze() after model/data set-up so long-lived objects leave the collector's scans, "
             "drop gc.collect() calls from the training loop (or run them every N steps), avoid creating "
             "reference cycles per step, or raise gc.set_threshold()." + hint),
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
    samples = sum(s["samples"] for s in ctx.phase_call_sites("python", limit=1_000))
    # A line named from few samples is marked uncertain with every rule's (evidence_strength.py).
    where, unexplained = "", None
    if not sites:
        taken = ctx.store.rows("SELECT count(*) FROM python_samples WHERE step IS NOT NULL")[0][0]
        unexplained = (f"none of the steps' {taken} Python stack samples fell in it" if taken else
                       "no Python stack samples in these steps (python_sampling off)")
    elif sites[0]["share_of_phase"] < NAMES_LINE_SHARE:
        unexplained = (f"no line holds half of its {samples} samples (the most, "
                       f"{short_site(sites[0]['call_site'])}, {sites[0]['share_of_phase']:.0%})")
    else:
        callee = library_call(ctx, "python", sites[0]["call_site"])
        sites[0] = {**sites[0], "library_call": callee}
        where = f", mostly at {short_site(sites[0]['call_site'])}" + (f" in {callee}" if callee else "")
    if unexplained:
        where = f"; unexplained: {unexplained}"
    fix = ("Move that work off the training loop or into a background thread: checkpoint writes every N steps "
           "(or asynchronously), logging and metrics every N steps, no time.sleep / queue.get / file reads "
           "between steps.")
    if not sites:
        fix = ("Find the Python doing it: `mlprof run` samples Python stacks by default (`mlprof callsites "
               "--phase python`); then " + fix[0].lower() + fix[1:])
    return [Finding(
        id="host_outside_ops", severity=severity, share=round(share, 4), impact_ns=int(outside_ns),
        title=f"{share:.0%} of step time runs no op at all (Python code, sleeps or I/O between ops){where}",
        evidence=Evidence(metrics={"outside_ops_ns": outside_ns, "gc_ns": gc_ns, "total_step_ns": ctx.total_step_ns,
                                   "samples": samples, "unexplained": unexplained},
                          steps=ctx.step_rows(lambda s: s.python_ns)[:5], call_sites=sites),
        fix=fix, rank=ctx.rank)]


def library_call(ctx: AdvisorContext, phase: str, site: str) -> str | None:
    """The library function the user's line ``site`` was in when sampled in ``phase`` (``copy.deepcopy``,
    ``torch.serialization.save``): the frame right below the user's line, in most of its samples; None
    when the line itself ran (plain Python) or no callee holds half of them."""
    rows = ctx.store.rows("""
        SELECT k.frames, count(*) FROM python_samples s
        JOIN phase_spans p ON p.window_index = s.window_index AND p.view = 'host' AND p.phase = ?
         AND s.ts_ns >= p.start_ns AND s.ts_ns < p.end_ns
        JOIN python_stacks k ON k.window_index = s.window_index AND k.stack_id = s.stack_id
        WHERE k.call_site = ? GROUP BY ALL""", [phase, site])
    callees: dict[str, int] = {}
    for frames_json, count in rows:
        frames = json.loads(frames_json or "[]")
        at = max((i for i, f in enumerate(frames) if f == site), default=None)
        if at is not None and at + 1 < len(frames):
            name = _dotted(frames[at + 1])
            callees[name] = callees.get(name, 0) + count
    total = sum(n for _, n in rows)
    if not callees:
        return None
    name, count = min(callees.items(), key=lambda kv: (-kv[1], kv[0]))
    return name if count >= 0.5 * total else None


# The last of these in a path: an installed package's site-packages sits inside lib/pythonX.Y.
_MODULE_PATH = re.compile(r".*(?:/site-packages/|/dist-packages/|/lib/python\d+(?:\.\d+)?/)(.+?)\.py:\d+ (\S+)$")


def _dotted(frame: str) -> str:
    """'/usr/lib/python3.11/copy.py:128 deepcopy' -> 'copy.deepcopy'; a frame outside installed or
    standard-library code keeps its file's name ('helpers.py:12 load' -> 'helpers.load')."""
    m = _MODULE_PATH.search(frame)
    if m:
        module = m.group(1).replace("/", ".").removesuffix(".__init__")
        return f"{module}.{m.group(2)}"
    path, _, rest = frame.rpartition(":")
    return f"{path.rsplit('/', 1)[-1].removesuffix('.py')}.{rest.partition(' ')[2]}"


def short_site(site: str) -> str:
    """'/long/path/train.py:76 checkpoint' -> 'train.py:76 checkpoint'."""
    path, _, rest = site.partition(":")
    return f"{path.rsplit('/', 1)[-1]}:{rest}"
