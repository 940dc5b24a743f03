"""CPU contention: other processes take the cores the job needs.

A job starved of CPU by other processes looks compute-bound to every
trace-only tool: its ops just take longer. The host sampler of `mlprof run`
sees the whole machine, and ``step_host_load`` joins its samples with each
step (docs/attribution.md). The rule reports when three things hold during the
steps:

* other processes used at least ``cpu_contention_other_share`` of the cores:
  processes outside the job, or the job's own processes other than the
  training process (DataLoader workers, helpers it started), which compete
  with it just the same;
* threads queued for a core (runnable threads above the core count);
* the training process got clearly less CPU than its threads could use:
  under 80% of min(torch threads, cores), less the time it waits for data
  or in collectives for other ranks,
  since a busy machine whose scheduler still gives the job its share is not
  slowing it.

It names the processes responsible. Its share is measured where `mlprof run`
recorded it: the share of step time the thread that steps was ready to run with
no core free (``steps.cpu_wait_ns``). Elsewhere it is an estimate: the CPU the
job missed, as a fraction of what it could use.
"""

from __future__ import annotations

from mlprof.analysis.advisor.context import AdvisorContext
from mlprof.analysis.advisor.model import Evidence, Finding, Thresholds, severity_for
from mlprof.analysis.host import cpu_demand_percent, is_starved, measured_wait_share, step_host_load, training_pid

__all__ = ["cpu_contention"]

def _mean(values: list) -> float | None:
    vals = [v for v in values if v is not None]
    return sum(vals) / len(vals) if vals else None


def _process_mean(load: list[dict], key: str) -> dict[tuple[str, int], float]:
    """Mean CPU % (of one core) per (name, pid) over the steps' samples."""
    acc: dict[tuple[str, int], list[float]] = {}
    for r in load:
        for p in r.get(key) or []:
            acc.setdefault((p["name"], p["pid"]), []).append(p["cpu_percent"] or 0.0)
    return {k: sum(v) / len(load) for k, v in acc.items()}


def _named(procs: dict[tuple[str, int], float], limit: int = 3) -> list[dict]:
    return [{"name": name, "pid": pid, "cpu_percent": round(cpu, 1)}
            for (name, pid), cpu in sorted(procs.items(), key=lambda kv: -kv[1])[:limit] if cpu > 0]


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
    # The training process itself, told apart from the job's other processes (DataLoader workers,
    # helpers it started), which compete with it for the same cores.
    pid = training_pid(ctx.store)
    job_procs = _process_mean(load, "job_processes")
    mine = [cpu for (_, p), cpu in job_procs.items() if p == pid]
    train = mine[0] if mine else job
    helpers = {k: v for k, v in job_procs.items() if k[1] != pid} if mine else {}
    helper_cores = max(job - train, 0.0) / 100.0 if mine else 0.0
    competing_cores = other_cores + helper_cores
    queueing = runnable is None or runnable > cores
    # What the training process could use while it computes: not while it waits for the next batch, nor
    # while it waits in a collective for the other ranks (a fast rank waiting for a slow one is not starved).
    waiting = ctx.share(sum(s.data_loading_ns + (s.host_communication_ns or 0) for s in ctx.steps))
    demand = (cpu_demand_percent(ctx.store, load) or 0.0) * max(1.0 - waiting, 0.0)
    starved = is_starved(train, demand)
    if not queueing or not starved or competing_cores / cores < th.cpu_contention_other_share:
        return []
    # Measured where `mlprof run` recorded it: the share of step time the stepping thread waited for a core.
    # Else the CPU the training process missed, of what its threads could use: an estimate.
    wait_share = measured_wait_share(ctx.store)
    share = wait_share if wait_share is not None else min(1.0 - train / demand, 1.0)
    severity = severity_for(share, th.cpu_contention_other_share, th)
    if severity is None:
        return []
    dur_of = {(st.window, st.step): st.dur_ns for st in ctx.steps}
    outside = _named(_process_mean(load, "top_processes"), 5)
    inside = _named(helpers)
    who_out = ", ".join(f"{p['name']} (pid {p['pid']}, {p['cpu_percent']:.0f}% of a core)" for p in outside[:3])
    who_in = ", ".join(f"{p['name']} (pid {p['pid']}, {p['cpu_percent']:.0f}%)" for p in inside)
    parts = []
    if other_cores >= helper_cores or not inside:
        parts.append(f"other processes used {other_cores:.1f} of {cores} cores" + (f" ({who_out})" if who_out else ""))
    if inside and helper_cores > 0.05:
        parts.append(f"the job's own other processes used {helper_cores:.1f}" + (f" ({who_in})" if who_in else ""))
    own = helper_cores > other_cores
    fix = ("The job's own processes compete with its training process for the cores: fewer DataLoader workers "
           "(num_workers + torch threads <= cores), fewer torch threads in workers (torch.set_num_threads(1) in "
           "worker_init_fn), or move helper work (evaluation, preprocessing, compression) off this host or out of "
           "the training window." if own else
           "Give the job its cores: stop or move the other processes (see the list), pin the job and them to "
           "separate cores (taskset, cgroups/cpusets, your scheduler's CPU requests), or run fewer jobs per "
           "host. Timings taken on this machine now will not reproduce: do not tune the model on them.")
    return [Finding(
        id="cpu_contention", severity=severity, share=round(share, 4), impact_ns=int(share * ctx.total_step_ns),
        title=f"CPU contention: the training process got {train:.0f}% of a core of the {demand:.0f}% it could "
              f"use; " + "; ".join(parts),
        evidence=Evidence(
            metrics={"cores": cores, "system_cpu_percent": round(system, 1), "job_cpu_percent": round(job, 1),
                     "training_process_cpu_percent": round(train, 1), "job_cpu_demand_percent": round(demand, 1),
                     "other_cores": round(other_cores, 2), "job_helper_cores": round(helper_cores, 2),
                     "runnable_threads": None if runnable is None else round(runnable, 1),
                     "training_thread_wait_share": None if wait_share is None else round(wait_share, 4),
                     "share_is": ("measured: the stepping thread's wait for a core, of step time" if wait_share is not None
                                  else "an estimate: CPU the training process missed, of what its threads could use")},
            ops=outside + [{**p, "in_job": True} for p in inside],
            steps=[{"step": r["step"], "window": r["window"], "dur_ns": dur_of.get((r["window"], r["step"])),
                    "job_cpu_percent": r["job_cpu_percent"],
                    "system_cpu_percent": r["system_cpu_percent"], "runnable_threads": r["runnable_threads"]}
                   for r in load][:5]),
        fix=fix, rank=ctx.rank)]
