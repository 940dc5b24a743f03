"""The machine's load while each run was measured, and a verdict that does not blame the code for it.

Two runs of the same code on one CPU host differ in step time when the host's
load differs: other jobs take cores, and a CPU-bound step stretches while its
thread waits for one. Two measures take that wait out, best first:

- **Step time less the wait for a core** (``steps.cpu_wait_ns``): the kernel's
  run-queue delay of the thread that steps, read by ``mlprof run`` at every step
  boundary. Sleeps, I/O and waits for data loader workers stay in the step; only
  time spent ready to run with no core free leaves it.
- **CPU time per step, estimated** from the host samples (step duration x the
  training process's CPU share over the samples covering it), for captures that
  lack the first.

The wall verdict stands on a quiet host. The load matters when other processes
used ``BUSY_OTHERS_PERCENT`` of a core or more during either run's steps (busy),
when the stepping thread waited for a core ``WAIT_MATERIAL`` of its step time or
more, when the training process's CPU share differs by ``LOAD_DIFFERS`` between
the runs, or when it got under ``STARVED_SHARE`` of what its threads could use
(starved). The verdict is then taken on the load-free measure, and the report
says why. On a busy or starved run the margin widens to ``BUSY_MIN_CHANGE``:
cores shared with another job run the same instructions slower (the other
hyperthread, the caches), a cost no wait time shows.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from mlprof.analysis.host import (STARVED_SHARE, cpu_demand_percent, is_starved, step_cpu_waits, step_host_load,
                                  training_cpu_percent, training_pid)
from mlprof.analysis.compare_runs import runs_verdict
from mlprof.analysis.stats import MIN_CHANGE, Verdict, relative_verdict
from mlprof.tables.store import TableStore

__all__ = ["RunLoad", "run_load", "load_aware_verdict", "load_aware_runs_verdict", "LOAD_DIFFERS", "BUSY_OTHERS_PERCENT", "WAIT_MATERIAL",
           "BUSY_MIN_CHANGE"]

# The training process's CPU share differing by this fraction between the runs means their loads differ.
LOAD_DIFFERS = 0.20
# Other processes using this much CPU (% of one core, mean over the steps' samples) make the host busy.
BUSY_OTHERS_PERCENT = 50.0
# The stepping thread waiting for a core this share of its step time or more: the load shows in step time.
WAIT_MATERIAL = 0.02
# On a busy host, changes under this fraction are not called. Measured on a 2-vCPU VM with two shell
# loops per core in another session (benchmarks/compare_verdicts.py, 12 busy runs of each pair, with
# the waits taken out): the same code came out -13%..+26% apart (its core's other hyperthread and the
# caches were shared, so the same instructions ran slower), twice the work +65%..+125%.
BUSY_MIN_CHANGE = 0.40


@dataclass(frozen=True)
class RunLoad:
    steps: int  # steps with host samples
    training_cpu_percent: float  # mean CPU (% of one core) the training process got during the steps
    cpu_ns_by_step: list[int]  # per step: its duration x the training process's CPU share
    demand_percent: float | None = None  # what its threads could use: min(torch threads, cores) x 100
    others_cpu_percent: float | None = None  # mean CPU other processes used during the steps, % of one core
    # Per step, exact (steps table): duration less the stepping thread's wait for a core; None when not measured.
    ready_ns_by_step: list[int] | None = None
    wait_share: float | None = None  # that wait over the steps' total duration

    @property
    def starved(self) -> bool:
        return self.steps > 0 and is_starved(self.training_cpu_percent, self.demand_percent)

    @property
    def busy(self) -> bool:
        """Other processes held cores during the steps (host samples)."""
        return (self.others_cpu_percent or 0.0) >= BUSY_OTHERS_PERCENT

    @property
    def waited(self) -> bool:
        """The stepping thread visibly waited for a core (other processes, or the job's own threads)."""
        return (self.wait_share or 0.0) >= WAIT_MATERIAL

    def to_dict(self) -> dict:
        return {"steps": self.steps, "training_cpu_percent": round(self.training_cpu_percent, 1),
                "demand_percent": self.demand_percent, "starved": self.starved,
                "others_cpu_percent": None if self.others_cpu_percent is None else round(self.others_cpu_percent, 1),
                "wait_for_cpu_pct": None if self.wait_share is None else round(100 * self.wait_share, 2),
                "busy": self.busy, "waited": self.waited}


def run_load(store: TableStore) -> RunLoad | None:
    """The training process's CPU during the steps (None with neither host samples nor per-step waits)."""
    durations = {(s, w): d for s, w, d in store.rows("SELECT step, window_index, dur_ns FROM steps")}
    waits = step_cpu_waits(store)
    ready = [dur - wait for dur, wait in waits] if waits else None
    wait_share = sum(w for _, w in waits) / sum(d for d, _ in waits) if waits else None
    load = step_host_load(store)
    pid = training_pid(store)
    cpu, cpu_ns, others = [], [], []
    for r in load:
        percent = training_cpu_percent(r, pid)
        dur = durations.get((r["step"], r["window"]))
        if percent is None or not dur:
            continue
        cpu.append(percent)
        cpu_ns.append(int(dur * percent / 100.0))
        if r.get("system_cpu_percent") is not None and r.get("cpu_count") and r.get("job_cpu_percent") is not None:
            # system_percent is of the whole machine; the job's (its processes) is of one core.
            others.append(max(r["system_cpu_percent"] * r["cpu_count"] - r["job_cpu_percent"], 0.0))
    if not cpu and ready is None:
        return None
    return RunLoad(len(cpu), sum(cpu) / len(cpu) if cpu else 0.0, cpu_ns,
                   cpu_demand_percent(store, load) if load else None,
                   sum(others) / len(others) if others else None, ready or None, wait_share)


def load_aware_verdict(wall: Verdict, base: RunLoad | None, new: RunLoad | None,
                       min_change: float = MIN_CHANGE) -> tuple[Verdict, list[str]]:
    """``wall`` unless the runs' loads matter; then the verdict on a measure the load does not stretch."""
    if base is None or new is None or wall.verdict == "inconclusive":
        return wall, []
    b, n = base.training_cpu_percent, new.training_cpu_percent
    sampled = base.steps > 0 and new.steps > 0
    differs = sampled and max(b, n) > 0 and abs(b - n) / max(b, n) >= LOAD_DIFFERS
    starved = sampled and (base.starved or new.starved)
    busy = base.busy or new.busy
    if not (differs or starved or busy or base.waited or new.waited):
        return wall, []
    why = _why(base, new, differs, starved)
    warning = f"{why}; wall time says {wall.sentence}"
    margin = max(min_change, BUSY_MIN_CHANGE) if busy or starved else min_change
    if base.ready_ns_by_step and new.ready_ns_by_step:
        measure = (f"step time less the time the training thread waited for a CPU core "
                   f"({_pct(base.wait_share)} of BASE's steps, {_pct(new.wait_share)} of NEW's)")
        judged = relative_verdict(base.ready_ns_by_step, new.ready_ns_by_step, min_change=margin)
        short = READY_MEASURE
    elif sampled:
        measure = "the CPU time per step of the training process"
        judged = relative_verdict(base.cpu_ns_by_step, new.cpu_ns_by_step, min_change=margin)
        short = CPU_SHARE_MEASURE
    else:
        return wall, []
    return _judged(wall, judged, measure, short, why, warning)


def _judged(wall: Verdict, judged: Verdict, measure: str, short: str, why: str, warning: str) -> tuple[Verdict, list]:
    if judged.verdict == "inconclusive":
        return replace(wall, verdict="inconclusive",
                       sentence=f"inconclusive: the machine's load differed between the runs ({warning})"), [warning]
    return replace(judged, measure=short, sentence=f"{judged.sentence}, judged on {measure} because {why}"), [warning]


# The measures a verdict can be taken on (Verdict.measure), besides "wall time".
READY_MEASURE = "step time less the wait for a core"
CPU_SHARE_MEASURE = "CPU time per step (host samples)"


def load_aware_runs_verdict(wall: Verdict, base: list[RunLoad | None], new: list[RunLoad | None],
                            min_change: float) -> tuple[Verdict, list[str]]:
    """:func:`load_aware_verdict` for several runs per side: when the load mattered in any run, every
    run is judged on the same load-free measure (all must have it), and the runs' spread decides."""
    if wall.verdict == "inconclusive" or any(r is None for r in base + new):
        return wall, []
    loaded = [r for r in base + new if r.busy or r.waited or r.starved]
    if not loaded:
        return wall, []
    busy = any(r.busy or r.starved for r in base + new)
    margin = max(min_change, BUSY_MIN_CHANGE) if busy else min_change
    why = (f"the machine's load mattered in {len(loaded)} of {len(base) + len(new)} runs "
           f"(other processes on its cores, or the training thread waiting for one)")
    warning = f"{why}; wall time says {wall.sentence}"
    if all(r.ready_ns_by_step for r in base + new):
        judged = runs_verdict([r.ready_ns_by_step for r in base], [r.ready_ns_by_step for r in new],
                              min_change=margin)
        return _judged(wall, judged, "step time less the time the training thread waited for a CPU core",
                       READY_MEASURE, why, warning)
    if all(r.steps for r in base + new):
        judged = runs_verdict([r.cpu_ns_by_step for r in base], [r.cpu_ns_by_step for r in new], min_change=margin)
        return _judged(wall, judged, "the CPU time per step of the training process", CPU_SHARE_MEASURE, why,
                       warning)
    return wall, []


def _why(base: RunLoad, new: RunLoad, differs: bool, starved: bool) -> str:
    b, n = base.training_cpu_percent, new.training_cpu_percent
    if differs:
        busier = "NEW" if n < b else "BASE"
        return (f"the machine's load differed: the training process got {b:.0f}% of a core during BASE's steps "
                f"and {n:.0f}% during NEW's, so {busier} waited for the CPU")
    if starved:
        return (f"the machine was busy: the training process got {b:.0f}% (BASE) and {n:.0f}% (NEW) of a core, "
                f"under {STARVED_SHARE:.0%} of the {max(base.demand_percent or 0, new.demand_percent or 0):.0f}% "
                "its threads could use, so wall time includes waiting for the CPU")
    if base.others_cpu_percent is not None and new.others_cpu_percent is not None:
        return (f"the machine was busy: other processes used {base.others_cpu_percent:.0f}% (BASE) and "
                f"{new.others_cpu_percent:.0f}% (NEW) of a core during the steps")
    return "the training thread waited for a CPU core held by other work"


def _pct(share: float | None) -> str:
    return "?" if share is None else f"{100 * share:.1f}%"
