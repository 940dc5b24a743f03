"""Rules only Ascend NPU runs can trigger (device_op_details, filled by the torch_npu importer)."""

from __future__ import annotations

from dataclasses import replace

from mlprof.analysis.advisor.context import AdvisorContext
from mlprof.analysis.advisor.model import Evidence, Finding, Thresholds, severity_for
from mlprof.analysis.devices import run_device

# The general rules speak CUDA; on an NPU run their fixes name the torch_npu equivalents.
_NPU_TERMS = (
    ("CUDA graphs (torch.compile mode='reduce-overhead')", "graph mode (torchair, or aclgraph via torch.compile)"),
    ("torch.cuda.", "torch.npu."),
    ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_NPU_ALLOC_CONF"),
    ("CUDA events", "NPU events"),
)

__all__ = ["ai_cpu_ops", "npu_op_compile", "npu_wording"]

# CANN calls that compile an operator on the host (the aclop path) before running it.
_COMPILE_API = ("AscendCL@aclopCompileAndExecute", "AscendCL@aclopCompileAndExecuteV2", "AscendCL@opCompile",
                "AscendCL@aclopCompile")


def _judge(ctx: AdvisorContext, th: Thresholds, rows: list[dict], warn_share: float):
    """(total ns, share of step time, severity) of ``rows``' ``total_ns``; None when not worth a finding."""
    total = sum(r["total_ns"] for r in rows)
    share = ctx.share(total)
    severity = severity_for(share, warn_share, th) if rows else None
    return None if severity is None else (total, share, severity)


def ai_cpu_ops(ctx: AdvisorContext, th: Thresholds) -> list[Finding]:
    """NPU ops that ran on the AI CPU (the slow general-purpose cores) instead of the AI Core (seed 002:
    a dropout's random numbers on AI CPU took 76% of the step)."""
    if not ctx.has_device:
        return []
    ops = ctx.store.dicts("""
        SELECT coalesce(x.op_type, d.name) AS name, count(*) AS count, sum(d.dur_ns) AS total_ns,
               max(d.dur_ns) AS max_ns, count(DISTINCT d.step) AS steps
        FROM device_ops d JOIN device_op_details x USING (window_index, device_op_id)
        WHERE d.step IS NOT NULL AND (x.accelerator_core = 'AI_CPU' OR x.task_type = 'AI_CPU')
        GROUP BY 1 ORDER BY total_ns DESC, 1""")
    judged = _judge(ctx, th, ops, th.ai_cpu_warn_share)
    if judged is None:
        return []
    total, share, severity = judged
    device_ns = ctx.store.rows("SELECT sum(dur_ns) FROM device_ops WHERE kind = 'kernel' AND step IS NOT NULL "
                               "AND NOT is_communication")[0][0] or 0
    top = ops[0]["name"]
    return [Finding(
        id="ai_cpu_ops", severity=severity, share=round(share, 4), impact_ns=int(total),
        title=f"AI CPU ops take {share:.0%} of step time ({top} first)",
        evidence=Evidence(metrics={"ai_cpu_ns": total, "total_step_ns": ctx.total_step_ns,
                                   "share_of_device_compute": round(total / device_ns, 4) if device_ns else None,
                                   "op_types": len(ops)},
                          ops=ops[:10]),
        fix=(f"{top} runs on the NPU's AI CPU, not its AI Core. Find the op in kernel_details.csv (Accelerator "
             "Core AI_CPU) and make it run on AI Core: use the torch_npu fused/NPU version of the op "
             "(e.g. torch_npu.npu_dropout_with_add_softmax, npu_fusion_attention), cast int64 or double inputs "
             "to int32/float32, avoid dynamic shapes for it, or move it out of the step (precompute masks, "
             "random numbers on the host once)."),
    )]


def npu_op_compile(ctx: AdvisorContext, th: Thresholds) -> list[Finding]:
    """Host time of CANN's compile-and-run op path (aclop) inside steps: torch_npu's JIT compile mode.
    The compile-and-run call includes running the op; ``op_compile_ns`` is the compiling alone."""
    names = ", ".join(f"'{n}'" for n in _COMPILE_API)
    calls = ctx.store.dicts(f"""
        SELECT r.name, count(*) AS count, sum(r.dur_ns) AS total_ns, max(r.dur_ns) AS max_ns
        FROM runtime_calls r WHERE r.step IS NOT NULL AND r.name IN ({names})
          AND NOT EXISTS (SELECT 1 FROM runtime_calls p WHERE p.name IN ({names}) AND p.tid = r.tid
                          AND p.start_ns <= r.start_ns AND r.start_ns + r.dur_ns <= p.start_ns + p.dur_ns
                          AND p.call_id <> r.call_id AND p.dur_ns > r.dur_ns)
        GROUP BY r.name ORDER BY total_ns DESC, r.name""")
    judged = _judge(ctx, th, calls, th.compile_warn_share)
    if judged is None:
        return []
    total, share, severity = judged
    compiling = ctx.store.rows("SELECT coalesce(sum(dur_ns), 0) FROM runtime_calls WHERE step IS NOT NULL "
                               "AND name IN ('AscendCL@opCompile', 'AscendCL@aclopCompile')")[0][0]
    # The calls run in the task queue's Dequeue@<NPU op> on the worker thread: name the NPU op.
    ops = ctx.store.dicts(f"""
        SELECT regexp_replace(h.name, '^Dequeue@', '') AS name, count(*) AS count, sum(r.dur_ns) AS compile_api_ns
        FROM runtime_calls r JOIN host_ops h ON h.op_id = r.host_op_id
        WHERE r.step IS NOT NULL AND r.name = '{calls[0]["name"]}' GROUP BY 1 ORDER BY 3 DESC, 1 LIMIT 10""")
    return [Finding(
        id="npu_op_compile", severity=severity, share=round(share, 4), impact_ns=int(total),
        title=f"Host time in CANN's compile-and-run op path (aclop) inside steps: {share:.0%} of step time "
              f"({sum(c['count'] for c in calls)} calls, {compiling / 1e6:.2f} ms of it compiling)",
        evidence=Evidence(metrics={"compile_api_ns": total, "op_compile_ns": compiling,
                                   "total_step_ns": ctx.total_step_ns}, ops=calls + ops),
        fix=("These ops go through CANN's compile-then-run path (aclop) on every call instead of a prebuilt "
             "kernel (aclnn). Use the precompiled binary "
             "kernels: torch_npu.npu.set_compile_mode(jit_compile=False) (and torch.npu.config."
             "allow_internal_format=False) at the start of the script; keep input shapes static for the ops "
             "listed, or warm them up before profiling."),
    )]


def npu_wording(ctx: AdvisorContext, findings: list[Finding]) -> list[Finding]:
    """On an Ascend NPU run, the findings' fixes with CUDA names replaced by their torch_npu equivalents."""
    if run_device(ctx.store).kind != "npu":
        return findings
    out = []
    for f in findings:
        fix = f.fix
        for cuda, npu in _NPU_TERMS:
            fix = fix.replace(cuda, npu)
        out.append(replace(f, fix=fix))
    return out
