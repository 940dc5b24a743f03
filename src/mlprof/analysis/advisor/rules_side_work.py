"""Work a step takes on besides its own: the user's code between the model's forward, the loss, backward, the
optimizer and the data loader (a ``copy.deepcopy(model)`` per step for an EMA, metrics in Python loops), in
Python and in the ops it runs. The attribution splits such work between the ``python`` phase and whatever
phase its ops land in, so neither host_outside_ops nor an op rule sees all of it; the sampled stacks do."""

from __future__ import annotations

from mlprof.analysis.advisor.context import AdvisorContext
from mlprof.analysis.advisor.model import Evidence, Finding, Thresholds, severity_for
from mlprof.analysis.advisor.rules_host import NAMES_LINE_SHARE, library_call, short_site
from mlprof.analysis.call_sites import side_work as side_work_rows

__all__ = ["side_work"]

_MIN_PYTHON_SHARE = 0.3


def _named_by_host_outside_ops(ctx: AdvisorContext, th: Thresholds, function_row: dict) -> bool:
    """host_outside_ops warns about the same function and names its line. Where no line holds half of the
    Python samples its finding says "unexplained", and the function, whose lines together hold them, is
    side_work's to name (a metrics function spread over 5 lines went unnamed at 1 thread)."""
    if ctx.robust_share(lambda s: s.python_ns) < th.host_outside_ops_warn_share:
        return False
    top = ctx.phase_call_sites("python", limit=1)
    return bool(top) and top[0]["share_of_phase"] >= NAMES_LINE_SHARE \
        and top[0]["call_site"].rsplit(" ", 1)[-1] == function_row["function"] \
        and top[0]["call_site"].startswith(function_row["file"] + ":")


def side_work(ctx: AdvisorContext, th: Thresholds) -> list[Finding]:
    if not ctx.steps:
        return []
    rows = side_work_rows(ctx.store)
    if not rows:
        return []
    top = rows[0]
    share = ctx.share(int(top["est_ns"]))
    severity = severity_for(share, th.side_work_warn_share, th)
    if severity is None or share < th.side_work_warn_share or _named_by_host_outside_ops(ctx, th, top):
        return []
    phases = top["phases"]
    python_ns = phases.get("python", 0)
    ops_ns = sum(ns for phase, ns in phases.items() if phase != "python")
    # Side work that is nearly all ops is the op rules' finding (a 64 MB torch.zeros per step is memory_churn
    # and dominant_op, with its line); side_work is for work whose Python is a real part of its cost.
    if python_ns < _MIN_PYTHON_SHARE * (python_ns + ops_ns):
        return []
    # Each of the function's lines with the library function it was in (copy.deepcopy, torch.save).
    lines = []
    for line, samples, est_ns in zip(top["lines"], top["line_samples"], top["line_est_ns"]):
        callee = next((c for c in (library_call(ctx, p, line) for p in sorted(phases, key=phases.get, reverse=True))
                       if c), None)
        lines.append({"call_site": line, "samples": int(samples), "self_ns": int(est_ns), "library_call": callee})
    file = short_site(lines[0]["call_site"]).split(":", 1)[0]
    where = file + ":" + ", :".join(short_site(r["call_site"]).split(" ", 1)[0].split(":", 1)[1]
                                    + (f" in {r['library_call']}" if r["library_call"] else "") for r in lines[:3])
    split = (f"{ctx.share(python_ns):.0%} of the step in Python, {ctx.share(ops_ns):.0%} in the ops it runs"
             if python_ns and ops_ns else "in Python" if python_ns else "in the ops it runs")
    return [Finding(
        id="side_work", severity=severity, share=round(share, 4), impact_ns=int(top["est_ns"]),
        title=(f"{share:.0%} of step time is {top['function']} ({where}), outside the model's forward, loss, "
               f"backward and optimizer ({split})"),
        evidence=Evidence(
            metrics={"est_ns": int(top["est_ns"]), "samples": int(top["samples"]), "python_ns": int(python_ns),
                     "ops_ns": int(ops_ns), "function": top["function"],
                     "phases_ns": {p: int(ns) for p, ns in phases.items()}},
            call_sites=lines[:5]),
        fix=("This runs every step besides training: do it less often or make it cheap. A weight EMA updated in "
             "place (torch._foreach_lerp_ on a copy made once) instead of a deep copy per step; metrics "
             "vectorized (one np.bincount / torch.bincount, a sort) or every N steps; checkpoints every N steps "
             "or in a background thread; anything that does not need the step's result moved off the loop."),
        rank=ctx.rank)]
