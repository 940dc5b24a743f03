"""Step times at one host speed: each step divided by how fast the host ran around it.

A shared VM runs the same code up to 40% slower for seconds at a time, with no
wait for a core to show it (a neighbour on the physical core, its caches, its
clock): two runs of the same code then differ as wholes and a one-run-per-side
verdict blames the code. ``mlprof run`` times a fixed probe between a window's
steps (``collect/speed_probe.py``, ``steps.speed_probe_ns``). Here each step's
time less its wait for a core is divided by the local host speed, the median
of the ``2 * NEIGHBOURS + 1`` probes nearest to it, and scaled by BASE's median
probe, so the figures read as ns at BASE's host speed. The verdict on those is
taken whenever both CPU-only runs carry at least ``MIN_PROBES`` probes.
"""

from __future__ import annotations

import statistics
from bisect import bisect_left
from dataclasses import dataclass, replace

from mlprof.analysis.compare_runs import runs_verdict
from mlprof.analysis.stats import Verdict, relative_verdict
from mlprof.tables.store import TableStore

__all__ = ["SpeedSteps", "speed_steps", "steps_at_one_speed", "speed_verdict", "speed_runs_verdict", "SPEED_MEASURE", "MIN_PROBES",
           "NEIGHBOURS"]

# Fewer probes than this in a run: its host speed is not known well enough to divide by.
MIN_PROBES = 5
# The local speed is the median of this many probes each side of a step, and the nearest one.
NEIGHBOURS = 4
SPEED_MEASURE = "step time at one host speed"


@dataclass(frozen=True)
class SpeedSteps:
    """One run's steps divided by the host's speed around each (``unit_ns``: 1.0 is one probe's time)."""

    per_probe: list[float]  # per step: (duration - wait for a core) / local probe ns
    median_probe_ns: float
    probes: int

    def at(self, probe_ns: float) -> list[int]:
        """The steps in ns at the host speed where the probe takes ``probe_ns``."""
        return [round(r * probe_ns) for r in self.per_probe]


def speed_steps(store: TableStore) -> SpeedSteps | None:
    """The run's steps at one host speed; None with fewer than ``MIN_PROBES`` probes (older captures too)."""
    return steps_at_one_speed(store.rows("SELECT start_ns, dur_ns, cpu_wait_ns, speed_probe_ns FROM steps"))


def steps_at_one_speed(rows: list[tuple], neighbours: int = NEIGHBOURS) -> SpeedSteps | None:
    """:func:`speed_steps` on ``(start_ns, dur_ns, cpu_wait_ns, speed_probe_ns)`` rows (Nones where not measured).
    ``neighbours``: probes each side of a step in its local speed (fewer follow a steady drift more closely)."""
    rows = sorted(rows, key=lambda r: r[0])
    probed = [(start, probe) for start, _, _, probe in rows if probe is not None and probe > 0]
    if len(probed) < MIN_PROBES:
        return None
    starts = [start for start, _ in probed]
    width = 2 * neighbours + 1
    per_probe = []
    for start, dur, wait, _ in rows:
        if dur is None or dur <= 0:
            continue
        i = min(bisect_left(starts, start), len(probed) - 1)
        lo = max(0, min(i - neighbours, len(probed) - width))
        local = statistics.median(p for _, p in probed[lo:lo + width])
        per_probe.append(max(dur - (wait or 0), 1) / local)
    return SpeedSteps(per_probe, statistics.median(p for _, p in probed), len(probed))


def _probe_us(runs: list[SpeedSteps]) -> str:
    return "/".join(f"{r.median_probe_ns / 1e3:.0f}" for r in runs)


def _judged(judged: Verdict, wall: Verdict, base: list[SpeedSteps], new: list[SpeedSteps]) -> tuple[Verdict, list]:
    probes = (f"a fixed probe took {_probe_us(base)} us during BASE's steps and {_probe_us(new)} us during NEW's")
    if judged.verdict == "inconclusive":
        return replace(wall, verdict="inconclusive", sentence=f"{judged.sentence} ({probes})"), []
    sentence = (f"{judged.sentence}, judged on step time less the wait for a core at one host speed "
                f"({probes})")
    warnings = []
    if wall.verdict != judged.verdict and wall.verdict != "inconclusive":
        warnings.append(f"the host ran at different speeds ({probes}); wall time says {wall.sentence}")
    return replace(judged, measure=SPEED_MEASURE, sentence=sentence), warnings


def speed_verdict(wall: Verdict, base: SpeedSteps | None, new: SpeedSteps | None,
                  min_change: float) -> tuple[Verdict, list[str]] | None:
    """The verdict on steps at one host speed, one run per side; None when a run has no probes."""
    if base is None or new is None:
        return None
    scale = base.median_probe_ns
    judged = relative_verdict(base.at(scale), new.at(scale), min_change=min_change)
    return _judged(judged, wall, [base], [new])


def speed_runs_verdict(wall: Verdict, base: list[SpeedSteps | None], new: list[SpeedSteps | None],
                       min_change: float) -> tuple[Verdict, list[str]] | None:
    """:func:`speed_verdict` for several runs per side; None unless every run has probes."""
    if any(r is None for r in base + new):
        return None
    scale = base[0].median_probe_ns
    judged = runs_verdict([r.at(scale) for r in base], [r.at(scale) for r in new], min_change=min_change)
    return _judged(judged, wall, base, new)
