"""What every rule needs about one parsed output, computed once and shared."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

from mlprof.analysis.communication import rank_of
from mlprof.analysis.host import step_cpu_waits_by_step
from mlprof.analysis.steps import StepBreakdown, step_breakdown
from mlprof.tables.names import module_frame_sql
from mlprof.tables.store import TableStore

__all__ = ["AdvisorContext", "USER_FRAME_SQL", "innermost_sql"]


def innermost_sql(frame: str) -> str:
    """The name of the innermost of the frames (alias ``frame``) around an op, as a GROUP BY aggregate.

    The latest to start, then the first to end, then by name: frames that start in the same
    microsecond (traces are in us) tied on the start alone, and the pick changed from run to run.
    """
    return f"arg_max({frame}.name, ({frame}.start_ns, -{frame}.end_ns, {frame}.name))"


# Python frames that are the user's code, not torch's or the profiler's own.
USER_FRAME_SQL = ("category = 'python_function' AND name NOT LIKE '<built-in%' "
                  "AND name NOT LIKE 'torch/%' AND name NOT LIKE '%site-packages/%' "
                  "AND name NOT LIKE 'mlprof/%' AND name NOT LIKE '%/mlprof/%' "
                  f"AND NOT {module_frame_sql()} AND name NOT LIKE 'threading.py%' "
                  "AND name NOT LIKE '<frozen%' AND name NOT LIKE 'contextlib.py%'")


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
        """Where the matching ops were called from: innermost user Python frame and nn.Module.

        Needs ``with_stack=True`` (python_function events); returns [] without it.
        Frames are matched by time containment on the op's thread, because
        Kineto's python frames are not in the op parent chain.
        """
        has_frames = self.store.rows("SELECT count(*) FROM host_ops WHERE category = 'python_function'")[0][0]
        if not has_frames:
            return []
        return self.store.dicts(f"""
            WITH o AS (SELECT op_id, window_index, tid, start_ns, start_ns + dur_ns AS end_ns,
                              folded_self_ns FROM host_ops WHERE {op_filter_sql}),
            frames AS (SELECT window_index, tid, start_ns, start_ns + dur_ns AS end_ns, name,
                              {module_frame_sql()} AS is_module
                       FROM host_ops WHERE ({USER_FRAME_SQL}) OR {module_frame_sql()}),
            hit AS (
                SELECT o.op_id, o.folded_self_ns,
                       {innermost_sql("f")} FILTER (WHERE NOT f.is_module) AS call_site,
                       {innermost_sql("f")} FILTER (WHERE f.is_module) AS module
                FROM o JOIN frames f ON f.window_index = o.window_index AND f.tid = o.tid
                     AND f.start_ns <= o.start_ns AND f.end_ns >= o.end_ns
                GROUP BY o.op_id, o.folded_self_ns)
            SELECT call_site, module, count(*) AS count, sum(folded_self_ns) AS self_ns
            FROM hit GROUP BY call_site, module ORDER BY self_ns DESC, call_site, module LIMIT {int(limit)}""", params)

    def sampled_call_sites(self, op_filter_sql: str, params: list, limit: int = 3) -> list[dict]:
        """The user's lines the Python sampler saw while the matching host ops ran (on any thread
        of the window), most samples first; [] without samples. Works at every level, unlike
        :meth:`call_sites`, which needs Kineto's python frames."""
        if not self.store.rows("SELECT count(*) FROM python_samples")[0][0]:
            return []
        return self.store.dicts(f"""
            WITH o AS (SELECT window_index, start_ns, start_ns + dur_ns AS end_ns FROM host_ops
                       WHERE {op_filter_sql}),
            hit AS (SELECT DISTINCT s.window_index, s.ts_ns, s.stack_id, s.weight_ns FROM python_samples s
                    JOIN o ON o.window_index = s.window_index AND s.ts_ns >= o.start_ns AND s.ts_ns < o.end_ns)
            -- The site's most frequent leaf (first by name among ties), as call_sites gives it: any_value
            -- gave whichever leaf the threads met first.
            SELECT k.call_site, mode() WITHIN GROUP (ORDER BY k.leaf) AS leaf, count(*) AS samples,
                   sum(h.weight_ns) AS self_ns
            FROM hit h JOIN python_stacks k ON k.window_index = h.window_index AND k.stack_id = h.stack_id
            WHERE k.call_site IS NOT NULL
            GROUP BY k.call_site ORDER BY samples DESC, k.call_site LIMIT {int(limit)}""", params)
