"""What every rule needs about one parsed output, computed once and shared."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

from mlprof.analysis.communication import rank_of
from mlprof.analysis.host import step_cpu_waits_by_step
from mlprof.analysis.op_call_sites import sampled_call_sites, traced_call_sites
from mlprof.analysis.steps import StepBreakdown, step_breakdown
from mlprof.tables.store import TableStore

__all__ = ["AdvisorContext"]


@dataclass
class AdvisorContext:
    """One parsed output (one rank) seen by the rules."""

    store: TableStore
    _temp_tables: set[str] = field(default_factory=set, repr=False)

    def temp_table(self, name: str, select_sql: str) -> str:
        """``name``: a temporary table of ``select_sql``'s rows, made on first use. For a subquery
        several rules (or one rule several times) filter by: it is computed once per output."""
        if name not in self._temp_tables:
            self.store.sql(f"CREATE OR REPLACE TEMP TABLE {name} AS {select_sql}")
            self._temp_tables.add(name)
        return name

    @cached_property
    def steps(self) -> list[StepBreakdown]:
        return step_breakdown(self.store)

    @cached_property
    def total_step_ns(self) -> int:
        return sum(s.dur_ns for s in self.steps)

    @cached_property
    def has_device(self) -> bool:
        return any(s.computing_ns is not None for s in self.steps)

    @cached_property
    def rank(self) -> int | None:
        return rank_of(self.store)

    @cached_property
    def metadata(self) -> dict:
        return self.store.metadata()

    @cached_property
    def cpu_wait_ns(self) -> dict[tuple, int] | None:
        """Per (window, step): the stepping thread's measured wait for a CPU core (None: not measured for every step)."""
        by_step = step_cpu_waits_by_step(self.store)
        return {key: wait for key, (_dur, wait) in by_step.items()} if by_step else None

    def share(self, ns: int | float) -> float:
        return float(ns) / self.total_step_ns if self.total_step_ns else 0.0

    def robust_share(self, key) -> float:
        """Share of ``key(step)`` in step time with the worst step left out (5+ steps).

        Severity is judged on this: one step hit by a preemption on a busy
        host must not turn a healthy run into a warning, while a problem that
        recurs still shows in the other steps. Reported shares stay totals.
        """
        if len(self.steps) < 5:
            return self.share(sum(key(s) or 0 for s in self.steps))
        worst = max(self.steps, key=lambda s: key(s) or 0)
        rest = [s for s in self.steps if s is not worst]
        total = sum(s.dur_ns for s in rest)
        return sum(key(s) or 0 for s in rest) / total if total else 0.0

    def step_rows(self, key) -> list[dict]:
        """Per-step rows {"step", "window", "dur_ns", "value_ns", "share"}, worst first, for ``key(step)``."""
        rows = [{"step": s.step, "window": s.window, "dur_ns": s.dur_ns, "value_ns": int(key(s) or 0),
                 "share": round(key(s) / s.dur_ns, 4) if s.dur_ns and key(s) else 0.0} for s in self.steps]
        return sorted(rows, key=lambda r: -r["value_ns"])

    def phase_call_sites(self, phase: str, limit: int = 5) -> list[dict]:
        """The user's lines behind a host phase, from the Python sampler (docs/attribution.md); [] without samples."""
        from mlprof.analysis.call_sites import call_sites

        return [{"call_site": r["call_site"], "leaf": r["leaf"], "self_ns": r["est_ns"], "samples": r["samples"],
                 "share_of_phase": round(r["share_of_phase"], 4)}
                for r in call_sites(self.store, phase=phase, limit=limit)]

    def call_sites(self, op_filter_sql: str, params: list, limit: int = 5) -> list[dict]:
        """Where the matching ops were called from, from Kineto's Python frames (``with_stack=True``; [] without):
        ``op_call_sites.traced_call_sites``."""
        return traced_call_sites(self.store, op_filter_sql, params, limit)

    def sampled_call_sites(self, op_filter_sql: str, params: list, limit: int = 3) -> list[dict]:
        """The user's lines the Python sampler saw while the matching host ops ran: ``op_call_sites.sampled_call_sites``."""
        return sampled_call_sites(self.store, op_filter_sql, params, limit)

