"""Rules about the run's configuration: debug modes left on, and settings that make the same code slower.

The collector records the torch settings of every window (profiler_metadata's
``torch_state``, collect/torch_state.py) and the environment variables that
change speed (``environment``). A mode whose cost shows in the trace is
charged with it and judged like any other time (:func:`severity_for`); a
mode whose cost the trace cannot show is an ``info`` finding with its fix.
Plain traces have no such metadata and get none of these findings, except
:func:`grad_without_backward`, read from the trace alone.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from mlprof.analysis.advisor.context import AdvisorContext
from mlprof.analysis.advisor.model import Evidence, Finding, Thresholds, severity_for
from mlprof.tables.names import KERNEL_LAUNCH_SQL, backward_node_sql

__all__ = ["anomaly_detection", "launch_blocking", "debug_environment", "backend_settings",
           "grad_without_backward", "torch_state_windows", "setting_on", "anomaly_mode_on", "anomaly_cost_by_op",
           "defer_to_anomaly"]


def torch_state_windows(ctx: AdvisorContext) -> list[dict]:
    """The capture's per-window torch settings ([] for plain traces and older captures)."""
    windows = ctx.metadata.get("profiler_metadata.torch_state")
    return [w for w in windows if isinstance(w, dict)] if isinstance(windows, list) else []


def setting_on(ctx: AdvisorContext, key: str) -> list[int]:
    """The windows in which ``key`` was on: at their start, or switched on during them."""
    found = []
    for w in torch_state_windows(ctx):
        start = w.get("at_start") if isinstance(w.get("at_start"), dict) else {}
        changed = w.get("changed") if isinstance(w.get("changed"), dict) else {}
        during = changed.get(key)
        if start.get(key) is True or (isinstance(during, list) and True in during):
            found.append(w.get("window"))
    return found


def anomaly_mode_on(ctx: AdvisorContext) -> bool:
    """Autograd anomaly detection was on in some window (other rules defer to :func:`anomaly_detection`)."""
    return bool(setting_on(ctx, "anomaly_enabled"))


def _env(ctx: AdvisorContext) -> dict[str, str]:
    env = ctx.metadata.get("profiler_metadata.environment")
    return {str(k): str(v) for k, v in env.items()} if isinstance(env, dict) else {}


def _truthy(value: str | None) -> bool:
    return value is not None and value.strip().lower() not in ("", "0", "false", "no", "off")


# -- anomaly detection ----------------------------------------------------------------------------------

# The ops autograd's engine runs after every backward node under anomaly detection (check_nan): a NaN
# test of each output, `isnan(out)._is_any_true().item()` (`.any()` in older torch).
_NAN_CHECK_OPS = ("aten::isnan", "aten::_is_any_true", "aten::any", "aten::item", "aten::is_nonzero")


def _nan_check_cost(ctx: AdvisorContext) -> tuple[int, int]:
    """(ns, ops): the NaN checks run beside the backward nodes, directly under their
    ``autograd::engine::evaluate_function:`` span (the node's own ops are under the node's span)."""
    names = ", ".join(f"'{n}'" for n in _NAN_CHECK_OPS)
    ns, count = ctx.store.rows(f"""
        SELECT coalesce(sum(c.dur_ns), 0), count(*) FROM host_ops c
        JOIN host_ops e ON e.op_id = c.parent_op_id AND e.window_index = c.window_index
        WHERE c.step IS NOT NULL AND c.category = 'cpu_op' AND c.name IN ({names})
          AND {backward_node_sql('e.name')}""")[0]
    return int(ns), int(count)


def _windows_sql(windows: list[int] | None) -> str:
    """A filter on window_index: the windows given (None: every window)."""
    if windows is None:
        return "true"
    return f"window_index IN ({', '.join(str(int(w)) for w in windows)})" if windows else "false"


def _node_creators_sql(windows: list[int] | None = None) -> str:
    """Per (window, autograd sequence number) of the forward: the innermost op carrying it, the one that
    created the graph node (an op that does not, aten::linear around its aten::t, carries the number the
    next node will get). Backward ops carry their forward thread's id; forward ops carry none (0)."""
    return """
        SELECT window_index, sequence_number, arg_max(name, (depth, start_ns)) AS name,
               arg_max(self_ns, (depth, start_ns)) AS self_ns, arg_max(step, (depth, start_ns)) AS step
        FROM host_ops
        WHERE step IS NOT NULL AND category = 'cpu_op' AND sequence_number IS NOT NULL
          AND coalesce(fwd_thread_id, 0) = 0 AND name NOT LIKE 'autograd::%' AND """ + _windows_sql(windows) + """
        GROUP BY window_index, sequence_number"""


def _anomaly_windows(ctx: AdvisorContext) -> list[int]:
    return [int(w) for w in setting_on(ctx, "anomaly_enabled") if isinstance(w, int)]


def _creator_costs_sql(creators: str) -> str:
    """Per node creator (``creators``: a table of :func:`_node_creators_sql`), the self time that is
    anomaly detection's: ``traceback_ns``, and ``per_node_ns`` (one traceback, typically).

    Anomaly detection stores the creating op's stack (traceback.extract_stack, in Python) inside that op,
    so every creator's self time grows by about the same amount whatever the op: an aten::view of 3 us
    grows to about 90 us, an aten::addmm of 70 us to about 160 us (a transformer, torch 2.13, CPU;
    docs/analysis.md). Most creators are cheap (views, transposes, activations), so the median creator's
    self time is about one traceback; an op name's own work is its median self time beyond that, and
    each creator is charged the rest of its self time (deeper stacks and the garbage collections the
    tracebacks' objects trigger included).
    """
    return f"""
        WITH c AS (SELECT *, median(self_ns) OVER () AS per_node_ns FROM {creators}),
        own AS (SELECT name, greatest(median(self_ns) - any_value(per_node_ns), 0) AS own_ns FROM c GROUP BY name)
        SELECT c.*, greatest(c.self_ns - own.own_ns, 0) AS traceback_ns FROM c JOIN own USING (name)"""


def _traceback_cost(ctx: AdvisorContext) -> dict[str, Any]:
    """The forward time spent recording a Python traceback for every autograd node created
    (:func:`_creator_costs_sql`). Only the windows recorded with the mode on count (in the others a
    creator's time is its own work)."""
    creators = ctx.temp_table("_anomaly_creators", _node_creators_sql(_anomaly_windows(ctx)))
    row = ctx.store.dicts(f"""
        SELECT count(*) AS nodes, coalesce(sum(traceback_ns), 0)::BIGINT AS traceback_ns,
               coalesce(any_value(per_node_ns), 0)::BIGINT AS per_node_ns
        FROM ({_creator_costs_sql(creators)})""")[0]
    forward_ns = ctx.store.rows(
        "SELECT coalesce(sum(end_ns - start_ns), 0) FROM phase_spans WHERE view = 'host' AND phase = 'forward' "
        f"AND {_windows_sql(_anomaly_windows(ctx))}")[0][0]
    row["forward_ns"] = int(forward_ns)
    samples = ctx.store.rows("""
        SELECT count(*) FILTER (WHERE k.frames LIKE '%traceback.py%' OR k.frames LIKE '%linecache.py%'),
               count(*) FROM python_samples s JOIN python_stacks k USING (window_index, stack_id)
        WHERE s.step IS NOT NULL""")[0]
    row["samples_in_traceback"], row["samples"] = int(samples[0]), int(samples[1])
    return row


_ANOMALY_FIX = ("Turn anomaly detection off for training: remove torch.autograd.set_detect_anomaly(True) (or the "
                "torch.autograd.detect_anomaly() context) left in from debugging, or guard it behind a debug flag. "
                "It records a Python traceback for every autograd node the forward creates and tests every "
                "gradient for NaN after each backward node. To catch NaNs cheaply, check the loss "
                "(torch.isfinite(loss)) every N steps and re-run only a failing step with anomaly detection on.")


def anomaly_detection(ctx: AdvisorContext, th: Thresholds) -> list[Finding]:
    """torch.autograd anomaly detection on while training, with its measured cost (see the module doc)."""
    windows = setting_on(ctx, "anomaly_enabled")
    if not windows or not ctx.steps:
        return []
    check_nan = bool(setting_on(ctx, "anomaly_check_nan"))
    nan_ns, nan_ops = _nan_check_cost(ctx)
    tb = _traceback_cost(ctx)
    cost_ns = nan_ns + tb["traceback_ns"]
    share = ctx.share(cost_ns)
    severity = severity_for(share, th.debug_mode_warn_share, th) or "info"
    steps_n = max(len(ctx.steps), 1)
    parts = []
    if tb["traceback_ns"]:
        parts.append(f"{ctx.share(tb['traceback_ns']):.0%} recording a traceback for each of "
                     f"{tb['nodes'] / steps_n:.0f} autograd nodes a step")
    if nan_ns:
        parts.append(f"{ctx.share(nan_ns):.0%} testing gradients for NaN")
    measured = f": {share:.0%} of step time ({', '.join(parts)})" if cost_ns else " (cost not measurable here)"
    by_op = sorted(anomaly_cost_by_op(ctx).items(), key=lambda kv: (-kv[1], kv[0])) if cost_ns else []
    return [Finding(
        id="anomaly_detection", severity=severity, share=round(share, 4), impact_ns=int(cost_ns),
        title=f"Autograd anomaly detection is on{measured}",
        evidence=Evidence(metrics={
            "windows": ",".join(str(w) for w in windows), "check_nan": check_nan,
            "traceback_ns": int(tb["traceback_ns"]), "nodes_per_step": round(tb["nodes"] / steps_n, 1),
            "traceback_ns_per_node": int(tb["per_node_ns"]),
            "traceback_share_of_forward": round(tb["traceback_ns"] / tb["forward_ns"], 4) if tb["forward_ns"] else None,
            "nan_check_ns": nan_ns, "nan_check_ops": nan_ops,
            "python_samples_in_traceback": tb["samples_in_traceback"], "python_samples": tb["samples"]},
            # The ops whose time the mode inflated most (a creator's traceback, the checks' own ops).
            ops=[{"name": name, "anomaly_ns": ns} for name, ns in by_op[:8] if ns]),
        fix=_ANOMALY_FIX, rank=ctx.rank)]


def anomaly_cost_by_op(ctx: AdvisorContext) -> dict[str, int]:
    """Per op name, the self time that is anomaly detection's: each node creator's traceback (as charged by
    :func:`_creator_costs_sql`) and every op of the NaN checks (the checks and the ops inside them)."""
    creators = ctx.temp_table("_anomaly_creators", _node_creators_sql(_anomaly_windows(ctx)))
    cost: dict[str, int] = {}
    for name, ns in ctx.store.rows(f"""
            SELECT name, sum(traceback_ns)::BIGINT FROM ({_creator_costs_sql(creators)}) GROUP BY name"""):
        cost[name] = cost.get(name, 0) + int(ns or 0)
    names = ", ".join(f"'{n}'" for n in _NAN_CHECK_OPS)
    # The checks and the ops under them, by parent links (a few levels: isnan > ne, _is_any_true > any >
    # as_strided): a join by time containment would pair every check with every op of its thread.
    for name, ns in ctx.store.rows(f"""
            WITH RECURSIVE tree(window_index, op_id, name, self_ns, level) AS (
                SELECT c.window_index, c.op_id, c.name, c.self_ns, 0 FROM host_ops c
                JOIN host_ops e ON e.op_id = c.parent_op_id AND e.window_index = c.window_index
                WHERE c.step IS NOT NULL AND c.category = 'cpu_op' AND c.name IN ({names})
                  AND {backward_node_sql('e.name')}
                UNION ALL
                SELECT h.window_index, h.op_id, h.name, h.self_ns, t.level + 1 FROM host_ops h
                JOIN tree t ON h.parent_op_id = t.op_id AND h.window_index = t.window_index
                WHERE t.level < 4 AND h.category = 'cpu_op')
            SELECT name, sum(self_ns) FROM tree GROUP BY name"""):
        cost[name] = cost.get(name, 0) + int(ns or 0)
    return cost


# Rules that charge time spent in ops, which anomaly detection inflates.
_TIME_IN_OPS = ("op_storm", "dominant_op", "dominant_module")


def defer_to_anomaly(ctx: AdvisorContext, findings: list[Finding]) -> list[Finding]:
    """With anomaly detection warning, a finding about time in ops whose cost is mostly anomaly detection's
    (its tracebacks and NaN checks: half of it or more) is ``info`` and says so: fixing the ops would not
    help while the mode is on (an anomaly-mode run read as "an op storm of the model's own small ops")."""
    anomaly = next((f for f in findings if f.id == "anomaly_detection" and f.severity in ("critical", "warning")),
                   None)
    if anomaly is None or not any(f.id in _TIME_IN_OPS for f in findings):
        return findings
    by_op = anomaly_cost_by_op(ctx)
    out = []
    for f in findings:
        if f.id in _TIME_IN_OPS and f.severity in ("critical", "warning") and f.impact_ns:
            if f.id == "dominant_op":
                caused = by_op.get(str(f.evidence.metrics.get("op")), 0)
            elif f.id == "op_storm":
                caused = sum(by_op.get(str(o.get("name")), 0) for o in f.evidence.ops)
            else:  # a module's ops are not listed: the module holds at most the whole cost
                caused = min(anomaly.impact_ns, f.impact_ns)
            if caused >= 0.5 * f.impact_ns:
                f = replace(f, severity="info",
                            title=(f"{f.title}; {min(caused / f.impact_ns, 1.0):.0%} of it is autograd anomaly "
                                   "detection's tracebacks and NaN checks (see anomaly_detection)"),
                            fix="Turn anomaly detection off first (see anomaly_detection), then profile again: " + f.fix)
                f.evidence.metrics["anomaly_detection_ns"] = int(caused)
        out.append(f)
    return out


# -- blocking launches ---------------------------------------------------------------------------------

# A kernel launch that returns at once takes a few microseconds; a blocking one waits for the kernel.
_LAUNCH_FREE_NS = 20_000


def launch_blocking(ctx: AdvisorContext, th: Thresholds) -> list[Finding]:
    """CUDA_LAUNCH_BLOCKING=1 / ASCEND_LAUNCH_BLOCKING=1: every launch waits for its kernel. The cost is
    the launch calls' time beyond a normal launch's (the host waiting instead of running ahead)."""
    env = _env(ctx)
    names = [n for n in ("CUDA_LAUNCH_BLOCKING", "ASCEND_LAUNCH_BLOCKING") if _truthy(env.get(n))]
    if not names:
        return []
    blocked_ns, launches = ctx.store.rows(f"""
        SELECT coalesce(sum(greatest(dur_ns - {_LAUNCH_FREE_NS}, 0)), 0), count(*) FROM runtime_calls
        WHERE step IS NOT NULL AND {KERNEL_LAUNCH_SQL}""")[0]
    share = ctx.share(blocked_ns)
    severity = severity_for(share, th.debug_mode_warn_share, th) or "info"
    what = " and ".join(f"{n}={env[n]}" for n in names)
    title = (f"{what}: kernel launches wait for their kernels, {share:.0%} of step time" if launches
             else f"{what}: every kernel launch waits for its kernel (no launches in the profiled steps)")
    return [Finding(
        id="launch_blocking", severity=severity, share=round(share, 4), impact_ns=int(blocked_ns),
        title=title,
        evidence=Evidence(metrics={**{n: env[n] for n in names}, "launches": int(launches),
                                   "blocked_ns": int(blocked_ns)}),
        fix=(f"Unset {' and '.join(names)}: it serialises the host with the device (for finding which kernel "
             "failed, not for training), so the host cannot queue work ahead and the device idles between kernels."),
        rank=ctx.rank)]


# -- debug variables whose cost the trace does not show ------------------------------------------------

# name -> (is it on?, why it slows the job, the fix)
_DEBUG_VARIABLES = {
    "TORCH_DISTRIBUTED_DEBUG": (lambda v: v.upper() in ("INFO", "DETAIL"),
                                "checks (at DETAIL) every collective's shapes across ranks with extra "
                                "collectives and logs DDP's bucket activity", "unset it (or set OFF)"),
    "NCCL_DEBUG": (lambda v: v.upper() in ("INFO", "TRACE"), "logs every communicator and, at TRACE, every call",
                   "unset it or set WARN"),
    "NCCL_DEBUG_SUBSYS": (lambda v: bool(v.strip()), "widens NCCL's debug logging", "unset it"),
    "TORCH_NCCL_DESYNC_DEBUG": (_truthy, "records extra state per collective to diagnose desyncs", "unset it"),
    "TORCH_SHOW_CPP_STACKTRACES": (_truthy, "builds a C++ stack trace for every exception torch raises "
                                   "(code that raises and catches, e.g. hasattr on tensors, pays each time)",
                                   "unset it"),
    "TORCH_CPP_LOG_LEVEL": (lambda v: v.upper() in ("INFO", "0"), "logs c10 messages at INFO",
                            "unset it or set WARNING"),
    "TORCH_LOGS": (lambda v: bool(v.strip()), "turns on torch.compile/dynamo logging (graph dumps, guards)",
                   "unset it"),
    "TORCH_USE_CUDA_DSA": (_truthy, "adds device-side assertions: extra checks in every kernel", "unset it"),
    "PYTORCH_NO_CUDA_MEMORY_CACHING": (_truthy, "disables the caching allocator: every tensor is a cudaMalloc "
                                       "and a cudaFree (memory_churn shows the time)", "unset it"),
    "PYTHONTRACEMALLOC": (_truthy, "traces every Python allocation", "unset it"),
    "PYTHONDEVMODE": (_truthy, "turns on Python's development mode: extra checks and debug allocator hooks", "unset it"),
    "PYTHONMALLOC": (lambda v: v.strip().lower().endswith("_debug") or v.strip().lower() == "debug",
                     "puts debug hooks on every Python allocation", "unset it"),
    "ASCEND_GLOBAL_LOG_LEVEL": (lambda v: v.strip() in ("0", "1"), "makes CANN log at DEBUG/INFO",
                                "set it to 3 (ERROR)"),
}


def debug_environment(ctx: AdvisorContext, th: Thresholds) -> list[Finding]:
    """Debug environment variables left set. Their cost does not show as its own time in the trace, so
    this is ``info``: the switch and its fix."""
    env = _env(ctx)
    found = []
    for name, (is_on, why, fix) in _DEBUG_VARIABLES.items():
        value = env.get(name)
        try:
            on = value is not None and is_on(value)
        except (AttributeError, ValueError):
            on = False
        if on:
            found.append({"name": name, "value": value, "why": why, "fix": fix})
    if not found:
        return []
    settings = ", ".join(f"{d['name']}={d['value']}" for d in found)
    return [Finding(
        id="debug_environment", severity="info", share=0.0, impact_ns=0,
        title=f"Debug settings in the environment: {settings}",
        evidence=Evidence(metrics={d["name"]: d["value"] for d in found},
                          ops=[{"name": d["name"], "value": d["value"], "effect": d["why"]} for d in found]),
        fix=" ".join(f"{d['name']}: {d['fix']}; it {d['why']}." for d in found),
        rank=ctx.rank)]


# -- backend settings ----------------------------------------------------------------------------------

def _first_start(ctx: AdvisorContext) -> dict:
    windows = torch_state_windows(ctx)
    start = windows[0].get("at_start") if windows else None
    return start if isinstance(start, dict) else {}


def _device_ops(ctx: AdvisorContext, like_sql: str) -> int:
    return int(ctx.store.rows(f"SELECT count(*) FROM host_ops WHERE step IS NOT NULL AND category = 'cpu_op' "
                              f"AND ({like_sql})")[0][0])


def backend_settings(ctx: AdvisorContext, th: Thresholds) -> list[Finding]:
    """Settings that trade speed for reproducibility or precision: deterministic algorithms, and on a
    GPU run cudnn.benchmark off for convolutions and TF32 off for float32 matmuls. The trace cannot
    show what the other setting would cost, so each is ``info`` with its fix."""
    if not torch_state_windows(ctx) or not ctx.steps:
        return []
    state = _first_start(ctx)
    findings = []

    def add(id_: str, title: str, metrics: dict, fix: str) -> None:
        findings.append(Finding(id=id_, severity="info", share=0.0, impact_ns=0, title=title,
                                evidence=Evidence(metrics=metrics), fix=fix, rank=ctx.rank))

    if setting_on(ctx, "deterministic_algorithms"):
        add("deterministic_algorithms",
            "torch.use_deterministic_algorithms(True) is on" + (" (warn_only)" if state.get("deterministic_warn_only")
                                                                else ""),
            {"warn_only": state.get("deterministic_warn_only"), "cudnn_deterministic": state.get("cudnn_deterministic")},
            "Keep it only when bit-exact reruns are required: it selects slower deterministic kernels (scatter/"
            "index_add via sorting, no cuDNN autotuning) on GPUs. Turn it off for throughput runs.")
    if ctx.has_device:
        convs = _device_ops(ctx, "name LIKE 'aten::%conv%'")
        if convs and state.get("cudnn_benchmark") is False:
            add("cudnn_benchmark_off", f"cudnn.benchmark is off with {convs} convolutions in the profiled steps",
                {"convolutions": convs, "cudnn_deterministic": state.get("cudnn_deterministic")},
                "Set torch.backends.cudnn.benchmark = True when input shapes are fixed: cuDNN then times its "
                "algorithms once per shape and keeps the fastest (keep it off when shapes vary every step).")
        matmuls = _device_ops(ctx, "name IN ('aten::mm', 'aten::addmm', 'aten::bmm', 'aten::baddbmm', 'aten::matmul')")
        if (matmuls and state.get("cuda_matmul_allow_tf32") is False
                and state.get("float32_matmul_precision") == "highest"):
            add("tf32_off", f"TF32 is off for float32 matmuls ({matmuls} in the profiled steps)",
                {"matmuls": matmuls, "float32_matmul_precision": state.get("float32_matmul_precision")},
                "On Ampere or newer GPUs, torch.set_float32_matmul_precision('high') runs float32 matmuls on "
                "tensor cores (TF32), several times faster at about 1e-3 relative precision; or train in "
                "bf16 autocast.")
    return findings


# -- grad mode without backward ------------------------------------------------------------------------

def grad_without_backward(ctx: AdvisorContext, th: Thresholds) -> list[Finding]:
    """Steps that build an autograd graph (forward ops with sequence numbers) but never run backward: an
    inference or evaluation loop without torch.no_grad()/inference_mode(). The graph's cost (saved
    tensors, node creation) has no span of its own, so this is ``info``."""
    if not ctx.steps:
        return []
    row = ctx.store.rows(f"""
        SELECT count(*) FILTER (WHERE sequence_number IS NOT NULL AND coalesce(fwd_thread_id, 0) = 0
                                  AND name NOT LIKE 'autograd::%'),
               count(*) FILTER (WHERE {backward_node_sql()}
                                  OR coalesce(fwd_thread_id, 0) <> 0)
        FROM host_ops WHERE step IS NOT NULL AND category = 'cpu_op'""")[0]
    recording, backward = int(row[0]), int(row[1])
    if not recording or backward:
        return []
    # With grad on but nothing requiring grad (frozen weights), every op carries the same number: no graph.
    # Each window's last number may be one no node took yet.
    creators = ctx.temp_table("_graph_creators", _node_creators_sql())
    nodes = int(ctx.store.rows(f"SELECT count(*) - count(DISTINCT window_index) FROM {creators}")[0][0])
    steps_n = max(len(ctx.steps), 1)
    if nodes < steps_n:
        return []
    return [Finding(
        id="grad_without_backward", severity="info", share=0.0, impact_ns=0,
        title=f"The steps build an autograd graph ({nodes / steps_n:.0f} nodes a step) but never run backward",
        evidence=Evidence(metrics={"graph_nodes": nodes, "nodes_per_step": round(nodes / steps_n, 1),
                                   "grad_enabled_at_window_start": ",".join(
                                       str(w) for w in setting_on(ctx, "grad_enabled")) or None}),
        fix=("Run inference and evaluation under torch.inference_mode() (or torch.no_grad()): without it every "
             "op records a graph node and keeps its inputs alive for a backward that never comes, costing "
             "time and memory."),
        rank=ctx.rank)]
