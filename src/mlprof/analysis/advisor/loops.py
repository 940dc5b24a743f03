"""The loops the advisor charges time to: op storms (a Python loop issuing many tiny ops per step, or
calling a module that often) found once per output, the line that loops, and the backward a loop's
ops caused (``backward_links``). Read by ``op_storm`` and by the rules that must not charge a loop's
time to one of its ops (``dominant_op``); see rules_storm.py for the rule.
"""

from __future__ import annotations

import json
import re
from collections import Counter

from mlprof.analysis.advisor.context import AdvisorContext
from mlprof.analysis.advisor.model import Thresholds

__all__ = ["storm_ops", "backward_causes", "loop_site", "module_caller"]


# Multi-tensor kernels (foreach/fused optimizers, _foreach_norm for clipping) loop over tensors in C++:
# the per-tensor ops they record are not issued one by one from Python.
_MULTI_TENSOR_SQL = "name LIKE 'aten::\\_foreach\\_%' ESCAPE '\\' OR name LIKE 'aten::\\_fused\\_%' ESCAPE '\\'"

def _find_storm(ctx: AdvisorContext, th: Thresholds) -> None:
    """Temp tables read by the rest of the rule, computed once: ``_storm_names`` (op names called
    ``op_storm_calls_per_step``+ times a step at under ``tiny_op_ns``) and ``_storm_ops`` (their
    outermost calls, and the outermost calls of modules called that often). Ops inside a
    multi-tensor kernel count for neither.

    Only ops outside the backward are judged: the backward of a loop is the loop's, charged to it
    through ``backward_links`` (rules_storm.py). Judged on their own, the backward's ops
    pass for tiny at one intra-op thread and not at several (a matmul of a per-sample graph takes
    longer on two threads than on one), and the finding followed the thread count."""
    ctx.store.con.execute(f"""
        CREATE OR REPLACE TEMP TABLE _step_ops AS
        SELECT h.op_id, h.parent_op_id, h.name, h.window_index, h.step, h.tid, h.start_ns, h.dur_ns FROM host_ops h
        WHERE h.step IS NOT NULL AND h.category = 'cpu_op'
          AND h.op_id NOT IN (SELECT op_id FROM backward_links) AND NOT EXISTS (
            SELECT 1 FROM host_ops m
            WHERE m.window_index = h.window_index AND m.tid = h.tid AND m.category = 'cpu_op'
              AND ({_MULTI_TENSOR_SQL}) AND h.start_ns >= m.start_ns AND h.start_ns < m.start_ns + m.dur_ns)""")
    ctx.store.con.execute(f"""
        CREATE OR REPLACE TEMP TABLE _storm_names AS
        SELECT name, count(*) AS calls, count(DISTINCT (window_index, step)) AS steps, avg(dur_ns) AS avg_ns
        FROM _step_ops GROUP BY name
        HAVING count(*) >= {int(th.op_storm_calls_per_step)} * count(DISTINCT (window_index, step))
           AND avg(dur_ns) < {int(th.tiny_op_ns)}""")
    # A module called op_storm_calls_per_step+ times a step is a loop's body whatever its ops take: on
    # several intra-op threads a per-sample matmul is no longer tiny, the loop around it still is the cost.
    ctx.store.con.execute(f"""
        CREATE OR REPLACE TEMP TABLE _storm_module_calls AS
        WITH repeated AS (
            SELECT module_path FROM module_calls WHERE step IS NOT NULL AND dur_ns IS NOT NULL GROUP BY module_path
            HAVING count(*) >= {int(th.op_storm_calls_per_step)} * count(DISTINCT (window_index, step))),
        calls AS (
            SELECT c.window_index, c.step, c.tid, c.start_ns, c.end_ns, c.depth FROM module_calls c
            JOIN repeated USING (module_path) WHERE c.step IS NOT NULL AND c.dur_ns IS NOT NULL)
        SELECT window_index, step, tid, start_ns, end_ns FROM calls WHERE depth = (SELECT min(depth) FROM calls)""")
    ctx.store.con.execute("""
        CREATE OR REPLACE TEMP TABLE _storm_named AS
        SELECT h.window_index, h.step, h.tid, h.start_ns, h.start_ns + h.dur_ns AS end_ns,
               coalesce(p.category = 'cpu_op', false) AS inside_op
        FROM _step_ops h JOIN _storm_names s ON s.name = h.name
        LEFT JOIN host_ops p ON p.op_id = h.parent_op_id
        WHERE p.name IS NULL OR p.name NOT IN (SELECT name FROM _storm_names)""")
    ctx.store.con.execute("""
        CREATE OR REPLACE TEMP TABLE _storm_ops AS
        SELECT n.* FROM _storm_named n ASOF LEFT JOIN _storm_module_calls m
          ON m.window_index = n.window_index AND m.tid = n.tid AND n.start_ns >= m.start_ns
        WHERE m.end_ns IS NULL OR n.start_ns >= m.end_ns
        UNION ALL SELECT window_index, step, tid, start_ns, end_ns, false FROM _storm_module_calls""")


# torch's nn.Module call machinery: one such frame (the outermost of _wrapped_call_impl/_call_impl) is
# where a module is called.
_MODULE_CALL_FRAME = re.compile(r"/torch/nn/modules/module\.py:\d+ (_wrapped_call_impl|_call_impl)$")


def module_caller(frames: list[str], user: set[str], depth: int) -> str | None:
    """The user's frame that calls a module at nesting ``depth`` (0: the outermost module call):
    the innermost user frame before the ``depth``-th module call of the stack (counted from the
    outermost), else None. A module's own forward may hold the loop (an outer model looping over
    an inner one), so frames are not dropped by their function's name."""
    boundaries = [i for i, f in enumerate(frames) if _MODULE_CALL_FRAME.search(f)
                  and not (i and _MODULE_CALL_FRAME.search(frames[i - 1]))]
    if len(boundaries) <= depth:
        return None
    return next((f for f in reversed(frames[:boundaries[depth]]) if f in user), None)


def loop_site(ctx: AdvisorContext, envelopes: list[dict], module_depth: int | None) -> dict | None:
    """The line that loops: the most common innermost user frame of the samples taken in the storm.

    When a whole module is called many times per step (``module_depth``: its nesting among module
    calls), its forward is the loop's body: the line that calls it is the one to change.
    """
    if not envelopes or not ctx.store.rows("SELECT count(*) FROM python_samples")[0][0]:
        return None
    ctx.store.temp_table("_storm_env", "window_index INTEGER, tid BIGINT, start_ns BIGINT, end_ns BIGINT",
                         [(e["window_index"], e["tid"], e["start_ns"], e["end_ns"]) for e in envelopes])
    # Backward samples only show the `.backward()` call: the loop is seen in the other phases.
    rows = ctx.store.rows("""
        SELECT k.user_frames, k.frames, p.phase = 'backward' AS in_backward, count(*) FROM python_samples s
        JOIN _storm_env e ON e.window_index = s.window_index AND s.ts_ns >= e.start_ns AND s.ts_ns < e.end_ns
        JOIN python_stacks k ON k.window_index = s.window_index AND k.stack_id = s.stack_id
        JOIN phase_spans p ON p.window_index = s.window_index AND p.view = 'host'
         AND s.ts_ns >= p.start_ns AND s.ts_ns < p.end_ns
        GROUP BY ALL""")
    outside_backward = [(f, a, n) for f, a, in_backward, n in rows if not in_backward]
    stacks = outside_backward or [(f, a, n) for f, a, _, n in rows]
    sites: Counter[str] = Counter()
    total = 0
    for frames_json, all_json, count in stacks:
        frames = json.loads(frames_json or "[]")
        site = None
        if module_depth is not None:
            site = module_caller(json.loads(all_json or "[]"), set(frames), module_depth)
            if site is None:  # no module call in this sample: its innermost frame outside module code
                frames = [f for f in frames if not f.endswith((" forward", " _call_impl", " __call__"))]
        site = site or (frames[-1] if frames else None)
        if site:
            sites[site] += count
            total += count
    if not sites:
        return None
    # Tied sites: the first by name, not the first the query's (hash-ordered) rows happened to give.
    site, count = min(sites.items(), key=lambda kv: (-kv[1], kv[0]))
    return {"call_site": site, "samples": count, "share_of_samples": round(count / total, 4)}


def storm_ops(ctx: AdvisorContext, th: Thresholds) -> str:
    """The temp table of the storm's ops (``_storm_ops``: window_index, step, tid, start_ns, end_ns), found
    once per output: other rules ask whether the ops they charge are a loop's."""
    if "_storm_ops" not in ctx._temp_tables:
        _find_storm(ctx, th)
        ctx._temp_tables.add("_storm_ops")
    return "_storm_ops"


def _repeated_module_depth(ctx: AdvisorContext, th: Thresholds) -> int | None:
    """The nesting depth of the outermost module called ``op_storm_calls_per_step``+ times a step, else None."""
    rows = ctx.store.rows(f"""
        SELECT min(depth) FROM (SELECT module_path, min(depth) AS depth FROM module_calls WHERE step IS NOT NULL
                                GROUP BY module_path
                                HAVING count(*) >= {int(th.op_storm_calls_per_step)} * count(DISTINCT (window_index, step)))""")
    return rows[0][0] if rows and rows[0][0] is not None else None


def backward_causes(ctx: AdvisorContext, th: Thresholds, op_filter_sql: str, params: list) -> dict:
    """Where the backward share of the matching host ops came from (``backward_links``): their self
    time inside autograd nodes, the forward ops that created those nodes (by self time), the share
    of it whose forward op is part of a loop's op storm (:func:`storm_ops`), and the user's line
    that ran those forward ops (sampled Python stacks in the forward ops' span, outside backward)."""
    table = storm_ops(ctx, th)
    rows = ctx.store.dicts(f"""
        WITH o AS (SELECT op_id, window_index, folded_self_ns FROM host_ops WHERE {op_filter_sql}),
        linked AS (
            SELECT o.folded_self_ns AS self_ns, f.name AS forward_op, b.forward_op_id, f.window_index, f.step,
                   f.tid, f.start_ns, f.start_ns + f.dur_ns AS end_ns
            FROM o JOIN backward_links b ON b.op_id = o.op_id JOIN host_ops f ON f.op_id = b.forward_op_id),
        flagged AS (
            SELECT l.*, coalesce(l.start_ns < s.end_ns, false) AS in_storm FROM linked l
            ASOF LEFT JOIN {table} s ON s.window_index = l.window_index AND s.tid = l.tid AND l.start_ns >= s.start_ns)
        SELECT forward_op, window_index, step, tid, in_storm, count(DISTINCT forward_op_id) AS forward_ops,
               sum(self_ns) AS self_ns, min(start_ns) AS start_ns, max(end_ns) AS end_ns
        FROM flagged GROUP BY ALL""", params)
    total = ctx.store.rows(f"SELECT sum(folded_self_ns) FROM host_ops WHERE {op_filter_sql}", params)[0][0] or 0
    backward_ns = sum(r["self_ns"] or 0 for r in rows)
    storm_ns = sum(r["self_ns"] or 0 for r in rows if r["in_storm"])
    by_op: Counter[str] = Counter()
    for r in rows:
        by_op[r["forward_op"]] += r["self_ns"] or 0
    envelopes = {}
    for r in rows:
        key = (r["window_index"], r["step"], r["tid"])
        lo, hi = envelopes.get(key, (r["start_ns"], r["end_ns"]))
        envelopes[key] = (min(lo, r["start_ns"]), max(hi, r["end_ns"]))
    site = loop_site(ctx, [{"window_index": w, "tid": tid, "start_ns": lo, "end_ns": hi}
                            for (w, _step, tid), (lo, hi) in sorted(envelopes.items(), key=str)],
                      _repeated_module_depth(ctx, th)) if rows else None
    return {"backward_share": backward_ns / total if total else 0.0,
            "loop_share": storm_ns / backward_ns if backward_ns else 0.0,
            "forward_ops": [{"name": n, "self_ns": int(ns)} for n, ns in
                            sorted(by_op.items(), key=lambda kv: (-kv[1], kv[0]))[:3]],
            "call_site": site}
