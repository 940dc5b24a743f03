"""Rule: input shapes that change from step to step (variable sequence lengths, ragged batches).

Two views, whichever the capture has:

* **Step time follows the input's size** (every `mlprof run`): the module
  recorder keeps the shape of each outermost module call's input; when the
  steps saw 3+ different input sizes and step time rises with size (Spearman
  rank correlation >= ``SIZE_CORRELATION``), slow steps are the big batches,
  not periodic work: this finding owns the time over the median step, and
  ``step_outliers`` stands down.
* **Ops with shapes that vary between steps** (``record_shapes``): more
  distinct shapes over the run than in a typical step. Its cost is not
  measurable from one run, so that alone is ``info``.

Varying shapes defeat the caching allocator's reuse, cuDNN/cuBLAS plan
caches and torch.compile's guards, and make step time unpredictable.
"""

from __future__ import annotations

import json
import math
import statistics

import numpy as np

from mlprof.analysis.advisor.context import AdvisorContext
from mlprof.analysis.advisor.model import Evidence, Finding, Thresholds, severity_for

__all__ = ["dynamic_shapes", "shape_driven_steps", "SIZE_CORRELATION"]

# Step time "follows" input size at this Spearman rank correlation or above.
SIZE_CORRELATION = 0.7
_MIN_STEPS = 4
_MIN_SIZES = 3

_FIX = ("Batches differ in size or sequence length from step to step. Bucket by length (a sampler that groups "
        "similar lengths, padding to a few fixed sizes) so shapes repeat; with torch.compile mark the varying "
        "dimension dynamic (torch._dynamo.mark_dynamic) so guards do not recompile; on a GPU, fixed shapes "
        "let the caching allocator and cuDNN/cuBLAS plan caches reuse their work.")


def _ranks(values: list[float]) -> np.ndarray:
    """Ranks with ties averaged (for Spearman's correlation)."""
    arr = np.asarray(values, dtype=float)
    order = arr.argsort(kind="stable")
    ranks = np.empty(len(arr))
    ranks[order] = np.arange(len(arr), dtype=float)
    for v in np.unique(arr):
        tie = arr == v
        ranks[tie] = ranks[tie].mean()
    return ranks


def shape_driven_steps(ctx: AdvisorContext) -> dict | None:
    """Per-step input sizes and their rank correlation with step time, when step time follows them."""
    rows = ctx.store.rows("""
        SELECT window_index, step, input_shape FROM module_calls
        WHERE step IS NOT NULL AND depth = 0 AND input_shape IS NOT NULL""")
    sizes: dict[tuple[int, int], int] = {}
    shapes: set[str] = set()
    for window, step, shape_json in rows:
        try:
            shape = json.loads(shape_json)
        except ValueError:
            continue
        if isinstance(shape, list) and all(isinstance(d, int) for d in shape):
            sizes[(window, step)] = sizes.get((window, step), 0) + math.prod(shape)
            shapes.add(shape_json)
    steps = [s for s in ctx.steps if (s.window, s.step) in sizes]
    if len(steps) < _MIN_STEPS or len({sizes[(s.window, s.step)] for s in steps}) < _MIN_SIZES:
        return None
    durations = [float(s.dur_ns) for s in steps]
    values = [float(sizes[(s.window, s.step)]) for s in steps]
    rx, ry = _ranks(values), _ranks(durations)
    if rx.std() == 0 or ry.std() == 0:
        return None
    rho = float(np.corrcoef(rx, ry)[0, 1])
    if rho < SIZE_CORRELATION:
        return None
    median = statistics.median(durations)
    return {"rho": round(rho, 3), "distinct_shapes": len(shapes), "median_step_ns": int(median),
            "excess_ns": int(sum(d - median for d in durations if d > median)),
            "steps": sorted(({"step": s.step, "window": s.window, "dur_ns": s.dur_ns,
                              "input_elements": sizes[(s.window, s.step)]} for s in steps),
                            key=lambda r: -r["dur_ns"])}


def _varying_ops(ctx: AdvisorContext) -> list[dict]:
    """Ops (with record_shapes) that ran with more distinct shapes over the run than in a typical step."""
    rows = ctx.store.dicts("""
        WITH per_step AS (
            SELECT name, window_index, step, count(DISTINCT input_dims) AS shapes FROM host_ops
            WHERE category = 'cpu_op' AND step IS NOT NULL AND input_dims IS NOT NULL
                  AND NOT coalesce(folded, false) GROUP BY 1, 2, 3),
        overall AS (
            SELECT name, count(DISTINCT input_dims) AS shapes, sum(folded_self_ns) AS self_ns FROM host_ops
            WHERE category = 'cpu_op' AND step IS NOT NULL AND input_dims IS NOT NULL
                  AND NOT coalesce(folded, false) GROUP BY 1)
        SELECT o.name, o.shapes AS distinct_shapes, median(p.shapes) AS shapes_per_step,
               count(p.step) AS steps, o.self_ns
        FROM overall o JOIN per_step p USING (name) GROUP BY o.name, o.shapes, o.self_ns""")
    steps_n = len(ctx.steps)
    varying = [r for r in rows if r["steps"] >= min(3, steps_n)
               and r["distinct_shapes"] >= max(3, 2 * r["shapes_per_step"])]
    return sorted(varying, key=lambda r: (-(r["self_ns"] or 0), r["name"]))


def dynamic_shapes(ctx: AdvisorContext, th: Thresholds) -> list[Finding]:
    if len(ctx.steps) < 3:
        return []
    driven = shape_driven_steps(ctx)
    varying = _varying_ops(ctx)
    if driven:
        share = ctx.share(driven["excess_ns"])
        severity = severity_for(share, th.step_outlier_warn_share, th) or "info"
        durs = [r["dur_ns"] for r in driven["steps"]]
        return [Finding(
            id="dynamic_shapes", severity=severity, share=round(share, 4), impact_ns=driven["excess_ns"],
            title=f"Step time follows the input's size: {driven['distinct_shapes']} input shapes over "
                  f"{len(durs)} steps, steps from {min(durs) / 1e6:.1f} to {max(durs) / 1e6:.1f} ms "
                  f"(rank correlation {driven['rho']:.2f}); {share:.0%} of step time is over the median step",
            evidence=Evidence(metrics={"rank_correlation": driven["rho"], "distinct_shapes": driven["distinct_shapes"],
                                       "median_step_ns": driven["median_step_ns"], "excess_ns": driven["excess_ns"],
                                       "ops_with_varying_shapes": len(varying)},
                              steps=driven["steps"][:10], ops=varying[:10]),
            fix=_FIX, rank=ctx.rank)]
    varying_ns = sum(r["self_ns"] or 0 for r in varying)
    share = ctx.share(varying_ns)
    if not varying or share < th.info_share:
        return []
    top = varying[0]
    return [Finding(
        id="dynamic_shapes", severity="info", share=round(share, 4), impact_ns=int(varying_ns),
        title=f"Input shapes change between steps: {top['name']} ran with {top['distinct_shapes']} shapes "
              f"over {top['steps']} steps ({len(varying)} op type(s) affected)",
        evidence=Evidence(metrics={"ops_with_varying_shapes": len(varying)}, ops=varying[:10]),
        fix=_FIX + " `mlprof op PATH --name " + top["name"] + "` lists the shapes.",
        rank=ctx.rank)]
