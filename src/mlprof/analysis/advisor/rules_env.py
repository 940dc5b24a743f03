"""Rules about the job's set-up: CPU threads versus cores, and recompilation."""

from __future__ import annotations

import re

from mlprof.analysis.advisor.context import AdvisorContext
from mlprof.analysis.advisor.model import Evidence, Finding, Thresholds, severity_for
from mlprof.analysis.host import measured_wait_share
from mlprof.tables.names import COMPILE_SQL

__all__ = ["cpu_oversubscription", "recompilation"]


def _int(value) -> int | None:
    try:
        return int(str(value).strip())
    except (TypeError, ValueError):
        return None


def cpu_oversubscription(ctx: AdvisorContext, th: Thresholds) -> list[Finding]:
    """More compute threads on this host than cores: OMP/intra-op threads x local ranks vs cores.

    Facts come from the capture's profiler_metadata (environment and system),
    recorded by mlprof's collector; plain traces have none, and get no finding.
    """
    env = ctx.metadata.get("profiler_metadata.environment") or {}
    system = ctx.metadata.get("profiler_metadata.system") or {}
    if not isinstance(env, dict) or not isinstance(system, dict) or not system:
        return []
    cores = _int(system.get("cpu_affinity_count")) or _int(system.get("cpu_count"))
    threads = _int(system.get("torch_num_threads")) or _int(env.get("OMP_NUM_THREADS"))
    if not cores or not threads:
        return []
    local_ranks = _int(env.get("LOCAL_WORLD_SIZE")) or 1
    wanted = threads * local_ranks
    if wanted <= th.threads_per_core * cores:
        return []
    # Measured where `mlprof run` recorded it: the share of step time the stepping thread waited for a
    # core (here held by the job's own threads, or cpu_contention's other processes: the explained
    # account counts these cross-cutting findings once). Elsewhere the time lost is not measurable.
    wait_share = measured_wait_share(ctx.store)
    share = wait_share or 0.0
    return [Finding(
        # A warning whatever the share (the thread facts alone say it is wrong); critical by the measured wait.
        id="cpu_oversubscription", severity="critical" if share >= th.critical_share else "warning",
        share=round(share, 4), impact_ns=int(share * ctx.total_step_ns),
        title=f"{wanted} compute threads ({threads} per process x {local_ranks} local ranks) on {cores} cores",
        evidence=Evidence(metrics={"threads_per_process": threads, "local_ranks": local_ranks, "cores": cores,
                                   "training_thread_wait_share": None if wait_share is None else round(wait_share, 4),
                                   "OMP_NUM_THREADS": env.get("OMP_NUM_THREADS"),
                                   "cpu_count": system.get("cpu_count")}),
        fix=(f"Set OMP_NUM_THREADS (or torch.set_num_threads) to cores / local ranks = "
             f"{max(cores // local_ranks, 1)} per process, and leave cores for DataLoader workers; "
             "oversubscribed OpenMP threads spin and preempt each other, making every CPU op slower."),
        rank=ctx.rank)]


_COMPILED = re.compile(r"Torch-Compiled Region: (\d+)/(\d+)")


def recompilation(ctx: AdvisorContext, th: Thresholds) -> list[Finding]:
    """torch.compile recompiling inside the profiled steps (dynamic shapes, guards failing)."""
    regions = ctx.store.rows("""
        SELECT name, count(*) FROM host_ops WHERE step IS NOT NULL AND name LIKE 'Torch-Compiled Region:%'
        GROUP BY name ORDER BY name""")
    recompiles = sorted({m.group(0) for name, _ in regions if (m := _COMPILED.search(name)) and int(m.group(2)) > 0})
    compile_rows = ctx.store.dicts(f"""
        SELECT name, count(*) AS count, sum(dur_ns) AS total_ns FROM host_ops
        WHERE step IS NOT NULL AND category <> 'python_function' AND {COMPILE_SQL}
        GROUP BY name ORDER BY total_ns DESC, name""")
    compile_ns = max((r["total_ns"] for r in compile_rows), default=0)
    share = ctx.share(compile_ns)
    severity = severity_for(share, th.compile_warn_share, th)
    if recompiles and severity in (None, "info"):
        severity = "warning"  # a recompile inside training steps is worth fixing whatever its cost here
    if severity is None:
        return []
    return [Finding(
        id="recompilation", severity=severity, share=round(share, 4), impact_ns=int(compile_ns),
        title=(f"torch.compile recompiled {len(recompiles)} time(s) inside the profiled steps" if recompiles
               else f"Compilation takes {share:.0%} of step time"),
        evidence=Evidence(metrics={"compile_ns": compile_ns, "recompiled_regions": ", ".join(recompiles)},
                          ops=compile_rows + [{"name": n, "count": c} for n, c in regions]),
        fix=("Find the failing guard with TORCH_LOGS=recompiles; mark varying dimensions dynamic "
             "(torch._dynamo.mark_dynamic or dynamic=True), pad/bucket variable sequence lengths, and keep "
             "Python scalars that change every step out of compiled functions (pass tensors)."),
        rank=ctx.rank)]
