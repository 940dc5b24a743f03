"""The machine's load while each run was measured, and a verdict that does not blame the code for it.

Two runs of the same code on one CPU host differ in step time when the host's
load differs: other jobs take cores, and a CPU-bound step stretches. The host
sampler of `mlprof run` records the CPU the training process got during the
steps (``step_host_load``). When that differs between the runs by
``LOAD_DIFFERS`` or more (relative), or it got under ``STARVED_SHARE`` of what its
threads could use in either run (a busy machine), wall time compares the
machines, not the code: the verdict is then taken on the CPU time per step
the training process used (step duration x its CPU share over the samples
covering the step), which waiting for a core does not stretch, and the report
says so.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from mlprof.analysis.host import (STARVED_SHARE, cpu_demand_percent, is_starved, step_host_load, training_cpu_percent,
                                  training_pid)
from mlprof.analysis.stats import MIN_CHANGE, Verdict, relative_verdict
from mlprof.tables.store import TableStore

__all__ = ["RunLoad", "run_load", "load_aware_verdict", "LOAD_DIFFERS"]

# The training process's CPU share differing by this fraction between the runs means their loads differ.
LOAD_DIFFERS = 0.20




@dataclass(frozen=True)
class RunLoad:
    steps: int  # steps with host samples
    training_cpu_percent: float  # mean CPU (% of one core) the training process got during the steps
    cpu_ns_by_step: list[int]  # per step: its duration x the training process's CPU share
    demand_percent: float | None = None  # what its threads could use: min(torch threads, cores) x 100

    @property
    def starved(self) -> bool:
        return is_starved(self.training_cpu_percent, self.demand_percent)

    def to_dict(self) -> dict:
        return {"steps": self.steps, "training_cpu_percent": round(self.training_cpu_percent, 1),
                "demand_percent": self.demand_percent, "starved": self.starved}


def run_load(store: TableStore) -> RunLoad | None:
    """The training process's CPU during the steps (None without host samples, e.g. a plain trace)."""
    load = step_host_load(store)
    if not load:
        return None
    durations = {(s, w): d for s, w, d in store.rows("SELECT step, window_index, dur_ns FROM steps")}
    pid = training_pid(store)
    cpu, cpu_ns = [], []
    for r in load:
        percent = training_cpu_percent(r, pid)
        dur = durations.get((r["step"], r["window"]))
        if percent is None or not dur:
            continue
        cpu.append(percent)
        cpu_ns.append(int(dur * percent / 100.0))
    if not cpu:
        return None
    return RunLoad(len(cpu), sum(cpu) / len(cpu), cpu_ns, cpu_demand_percent(store, load))


def load_aware_verdict(wall: Verdict, base: RunLoad | None, new: RunLoad | None,
                       min_change: float = MIN_CHANGE) -> tuple[Verdict, list[str]]:
    """``wall`` unless the runs' loads differ; then the verdict on CPU time per step, and a warning."""
    if base is None or new is None or wall.verdict == "inconclusive":
        return wall, []
    b, n = base.training_cpu_percent, new.training_cpu_percent
    differs = max(b, n) > 0 and abs(b - n) / max(b, n) >= LOAD_DIFFERS
    if not differs and not (base.starved or new.starved):
        return wall, []
    if differs:
        busier = "NEW" if n < b else "BASE"
        why = f"the machine's load differed: the training process got {b:.0f}% of a core during BASE's steps " \
              f"and {n:.0f}% during NEW's, so {busier} waited for the CPU"
    else:
        why = f"the machine was busy: the training process got {b:.0f}% (BASE) and {n:.0f}% (NEW) of a core, " \
              f"under {STARVED_SHARE:.0%} of the {max(base.demand_percent or 0, new.demand_percent or 0):.0f}% " \
              "its threads could use, so wall time includes waiting for the CPU"
    warning = f"{why}; wall time says {wall.sentence}"
    cpu = relative_verdict(base.cpu_ns_by_step, new.cpu_ns_by_step, min_change=min_change)
    if cpu.verdict == "inconclusive":
        return replace(wall, verdict="inconclusive",
                       sentence=f"inconclusive: the machine's load differed between the runs ({warning})"), [warning]
    reason = "the machine's load differed" if differs else "the machine was busy"
    return replace(cpu, sentence=f"{cpu.sentence}, judged on the CPU time per step of the training process "
                                 f"because {reason}"), [warning]
