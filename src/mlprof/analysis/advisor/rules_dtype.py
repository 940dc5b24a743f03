"""Rule: training on a slow dtype (float64, complex128) without meaning to.

A float64 model is the classic accident: ``torch.from_numpy`` keeps numpy's
float64, ``torch.set_default_dtype(torch.float64)`` left in from a test, a
``.double()`` copied from a tutorial. CPUs run float64 math at about half the
float32 rate, most GPUs at 1/32 to 1/64 of it, and no tensor cores apply.

Two sources, whichever the capture has: the dtypes mlprof's module recorder
reads at each module's first call (every `mlprof run`, no record_shapes
needed), and the input types of ops when shapes were recorded. The share is
the forward and backward time of the float64 modules (outermost ones only,
so nested modules count once), or the self time of ops on double inputs.
"""

from __future__ import annotations

from mlprof.analysis.advisor.context import AdvisorContext
from mlprof.analysis.advisor.model import Evidence, Finding, Thresholds, severity_for

__all__ = ["slow_dtype", "SLOW_DTYPES"]

SLOW_DTYPES = ("torch.float64", "torch.complex128")
# Kineto's "Input type" spellings of the same dtypes.
_SLOW_INPUT_TYPES = ("double", "c10::complex<double>")

_FIX = ("Train in float32 (or bf16/float16 autocast on a GPU): model.float() and float32 inputs. The usual "
        "sources of float64 are numpy arrays (torch.from_numpy keeps float64: add .float(), or "
        "np.asarray(x, dtype=np.float32)), torch.set_default_dtype(torch.float64), and .double() calls. Keep "
        "float64 only where the numerics need it (e.g. a loss reduction), not for the whole model.")


def _module_cost(ctx: AdvisorContext) -> tuple[int, list[dict]]:
    """Forward + backward ns of the outermost modules computing in a slow dtype, and those modules."""
    from mlprof.analysis.modules import module_tree

    slow = ", ".join(f"'{d}'" for d in SLOW_DTYPES)
    paths = ctx.store.dicts(f"""
        SELECT module_path, any_value(module_type) AS module_type,
               coalesce(any_value(param_dtype) FILTER (WHERE param_dtype IN ({slow})),
                        any_value(input_dtype) FILTER (WHERE input_dtype IN ({slow}))) AS dtype
        FROM module_calls WHERE step IS NOT NULL
        GROUP BY module_path HAVING dtype IS NOT NULL""")
    if not paths:
        return 0, []
    slow_paths = {p["module_path"]: p for p in paths}
    # Outermost only: a float64 Sequential's children are inside its time already.
    top = [p for p in slow_paths if not any(p.startswith(q + ".") for q in slow_paths if q != p)]
    stats = {m.path: m for m in module_tree(ctx.store)}
    modules, cost = [], 0
    for path in top:
        m = stats.get(path)
        if m is None:
            continue
        ns = m.total_ns + m.backward_total_ns
        cost += ns
        modules.append({"module": path, "module_type": slow_paths[path]["module_type"],
                        "dtype": slow_paths[path]["dtype"], "self_ns": ns, "forward_ns": m.total_ns,
                        "backward_ns": m.backward_total_ns, "calls": m.calls})
    modules.sort(key=lambda r: (-(r["forward_ns"] + r["backward_ns"]), r["module"]))
    return cost, modules


def _op_cost(ctx: AdvisorContext) -> tuple[int, list[dict]]:
    """Self ns of ops with a slow-dtype input (needs record_shapes), and the costliest of them."""
    cond = " OR ".join(f"lower(input_types) LIKE '%{t}%'" for t in _SLOW_INPUT_TYPES)
    ops = ctx.store.dicts(f"""
        SELECT name, count(*) AS count, sum(folded_self_ns) AS self_ns FROM host_ops
        WHERE step IS NOT NULL AND category = 'cpu_op' AND NOT coalesce(folded, false) AND ({cond})
        GROUP BY name ORDER BY self_ns DESC, name""")
    return sum(r["self_ns"] or 0 for r in ops), ops[:8]


def slow_dtype(ctx: AdvisorContext, th: Thresholds) -> list[Finding]:
    if not ctx.total_step_ns:
        return []
    module_ns, modules = _module_cost(ctx)
    op_ns, ops = _op_cost(ctx)
    cost_ns = min(max(module_ns, op_ns), ctx.total_step_ns)
    share = ctx.share(cost_ns)
    severity = severity_for(share, th.slow_dtype_warn_share, th)
    if severity is None or cost_ns <= 0 or not (modules or ops):  # nothing slow measured: nothing to name
        return []
    dtype = modules[0]["dtype"] if modules else "torch.float64"
    what = (f"{len(modules)} module(s) such as {modules[0]['module']} ({modules[0]['module_type']})" if modules
            else f"{len(ops)} op type(s) such as {ops[0]['name']}")
    speed = ("most GPUs run it at 1/32-1/64 of the float32 rate" if ctx.has_device
             else "CPUs run it at about half the float32 rate")
    return [Finding(
        id="slow_dtype", severity=severity, share=round(share, 4), impact_ns=int(cost_ns),
        title=f"{share:.0%} of step time computes in {dtype.removeprefix('torch.')}: {what}; {speed}",
        evidence=Evidence(metrics={"dtype": dtype, "slow_module_ns": module_ns, "slow_input_op_ns": op_ns,
                                   "total_step_ns": ctx.total_step_ns,
                                   "measured_by": "modules" if module_ns >= op_ns else "op input types"},
                          ops=ops, call_sites=modules[:5]),
        fix=_FIX, rank=ctx.rank)]
