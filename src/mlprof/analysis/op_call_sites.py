"""Where an op was called from: the user's Python lines (and nn.Module) around its calls.

Two sources, the first that the run has:

* **traced**: Kineto's Python frames (``with_stack=True``: ``python_function``
  events). A frame is matched to an op by time containment on the op's thread
  (Kineto's Python frames are not in the op parent chain); the innermost user
  frame and the innermost module frame around each call name it, and each call
  counts with its self time.
* **sampled**: mlprof's Python stack sampler (``python_sampling``, on under
  ``mlprof run``): the samples taken while a call ran, each worth its
  ``weight_ns``; the sampled stack's ``call_site`` (library frames folded into
  the user line that called them, docs/attribution.md).

The advisor's rules and the dashboard's operator drill-down read them here.
Pure SQL over the tables.
"""

from __future__ import annotations

from mlprof.tables.names import module_frame_sql
from mlprof.tables.store import TableStore

__all__ = ["USER_FRAME_SQL", "innermost_sql", "traced_call_sites", "sampled_call_sites", "op_call_sites"]


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


def traced_call_sites(store: TableStore, op_filter_sql: str, params: list, limit: int = 5) -> list[dict]:
    """Rows ``call_site``, ``module``, ``count``, ``self_ns`` for the host ops matching ``op_filter_sql``, from
    Kineto's Python frames; [] where the run has none (no ``with_stack``)."""
    has_frames = store.rows("SELECT count(*) FROM host_ops WHERE category = 'python_function'")[0][0]
    if not has_frames:
        return []
    return store.dicts(f"""
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


def sampled_call_sites(store: TableStore, op_filter_sql: str, params: list, limit: int = 3) -> list[dict]:
    """Rows ``call_site``, ``leaf``, ``samples``, ``self_ns``: the user's lines the Python sampler saw while the
    matching host ops ran (on any thread of the window), most samples first; [] without samples. Works at
    every profiler level, unlike :func:`traced_call_sites`."""
    if not store.rows("SELECT count(*) FROM python_samples")[0][0]:
        return []
    return store.dicts(f"""
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


def op_call_sites(store: TableStore, name: str, step: int | None = None, limit: int = 10) -> dict:
    """Where the calls of the op ``name`` (in ``step``, or all) came from: ``{"source": "traced" | "sampled" |
    None, "rows": [...]}`` (rows as :func:`traced_call_sites` or :func:`sampled_call_sites` give them)."""
    where, params = "name = ?", [name]
    if step is not None:
        where, params = where + " AND step = ?", params + [step]
    rows = traced_call_sites(store, where, params, limit)
    if rows:
        return {"source": "traced", "rows": rows}
    rows = sampled_call_sites(store, where, params, limit)
    return {"source": "sampled" if rows else None, "rows": rows}
