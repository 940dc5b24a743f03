"""CPU contention: other processes take the cores the job needs.

A job starved of CPU by other processes looks compute-bound to every
trace-only tool: its ops just take longer. The host sampler of `mlprof run`
sees the whole machine, and ``step_host_load`` joins its samples with each
step (docs/attribution.md). The rule reports when three things hold during the
steps:

* the rest of the machine used at least ``cpu_contention_other_share`` of its cores;
* threads queued for a core (runnable threads above the core count);
* the job got clearly less CPU than its threads could use: under 80% of
  min(torch threads, cores), since a busy machine whose scheduler still gives
  the job its share is not slowing it.

It names the processes responsible. Its share is the CPU the job missed,
as a fraction of what it could use.
"""

from __future__ import annotations

from mlprof.analysis.advisor.context import AdvisorContext
from mlprof.analysis.advisor.model import Evidence, Finding, Thresholds, severity_for
from mlprof.analysis.host import step_host_load

__all__ = ["cpu_contention"]

# The job is starved below this fraction of the CPU its threads could use.
_STARVED = 0.8


def _mean(values: list) -> float | None:
    vals = [v for v in values if v is not None]
    return sum(vals) / len(vals) if vals else None


def cpu_contention(ctx: AdvisorContext, th: Thresholds) -> list[Finding]:
    """Other processes busy on the job's cores during its steps, with threads waiting for a core."""
    load = [r for r in step_host_load(ctx.store) if r["cpu_count"]]
    if not load:
        return []
    cores = max(int(r["cpu_count"]) for r in load)
    system = _mean([r["system_cpu_percent"] for r in load])
    job = _mean([r["job_cpu_percent"] for r in load])
    runnable = _mean([r["runnable_threads"] for r in load])
    if system is None or job is None:
        return []
    # system_percent is the mean over cores; job_percent counts one core as 100.
    other_cores = max(system / 100.0 * cores - job / 100.0, 0.0)
    queueing = runnable is None or runnable > cores
    share_of_machine = other_cores / cores
    system_facts = ctx.metadata.get("profiler_metadata.system") or {}
    threads = system_facts.get("torch_num_threads") if isinstance(system_facts, dict) else None
    demand = min(threads if isinstance(threads, int) and threads > 0 else cores, cores) * 100.0
    starved = job < _STARVED * demand
    if not queueing or not starved or share_of_machine < th.cpu_contention_other_share:
        return []
    # The CPU the job missed, of what its threads could use: an estimate, not a measurement.
    share = min(1.0 - job / demand, 1.0)
    severity = severity_for(share, th.cpu_contention_other_share, th)
    if severity is None:
        return []
    top: dict[tuple[str, int], list[float]] = {}
    for r in load:
        for p in r["top_processes"]:
            top.setdefault((p["name"], p["pid"]), []).append(p["cpu_percent"])
    procs = sorted(({"name": name, "pid": pid, "cpu_percent": round(sum(v) / len(load), 1)}
                    for (name, pid), v in top.items()), key=lambda p: -p["cpu_percent"])[:5]
    who = ", ".join(f"{p['name']} (pid {p['pid']}, {p['cpu_percent']:.0f}% of a core)" for p in procs[:3])
    return [Finding(
        id="cpu_contention", severity=severity, share=round(share, 4), impact_ns=int(share * ctx.total_step_ns),
        title=f"CPU contention: other processes used {other_cores:.1f} of {cores} cores during the steps"
              + (f" ({who})" if who else ""),
        evidence=Evidence(
            metrics={"cores": cores, "system_cpu_percent": round(system, 1), "job_cpu_percent": round(job, 1),
                     "job_cpu_demand_percent": demand,
                     "other_cores": round(other_cores, 2), "runnable_threads": None if runnable is None
                     else round(runnable, 1), "estimate": "CPU the job missed, of what its threads could use"},
            ops=procs,
            steps=[{"step": r["step"], "window": r["window"], "job_cpu_percent": r["job_cpu_percent"],
                    "system_cpu_percent": r["system_cpu_percent"], "runnable_threads": r["runnable_threads"]}
                   for r in load][:5]),
        fix=("Give the job its cores: stop or move the other processes (see the list), pin the job and them to "
             "separate cores (taskset, cgroups/cpusets, your scheduler's CPU requests), or run fewer jobs per "
             "host. Timings taken on this machine now will not reproduce: do not tune the model on them."),
        rank=ctx.rank)]
