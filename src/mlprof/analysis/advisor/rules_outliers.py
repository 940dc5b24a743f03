"""Steps much slower than the median step: periodic work in the loop, or the machine.

A slow step says something about the code only when the code did something different in it. Steps slow by a
GC pause or by torch.compile compiling are gc_pauses' and recompilation's findings. Two kinds of slow step say
nothing about the code and are left out of the warning (each said in the finding):

- steps whose wait for a CPU core (``steps.cpu_wait_ns``, measured by `mlprof run`) covers half their excess
  or more: other processes held the cores (``cpu_contention`` reports the wait);
- steps that ran the same ops as a typical step, nothing else, and spent their excess inside those ops
  (:func:`same_work_steps`): the ops themselves ran slower. With torch's default intra-op threads, one
  helper thread preempted for a moment holds the whole op at its barrier, and the stepping thread's own
  wait does not show it; a neighbour on the host slows every op alike. Periodic work (an evaluation pass, a
  histogram every 100 steps) runs more ops or other ops; a checkpoint or a log write adds Python time.
"""

from __future__ import annotations

import statistics

from mlprof.analysis.steps import HOST_FIELDS
from mlprof.analysis.advisor.context import AdvisorContext
from mlprof.analysis.advisor.model import Evidence, Finding, Thresholds, severity_for
from mlprof.analysis.advisor.rules_host import library_call, short_site
from mlprof.analysis.advisor.rules_growth import growing_step_time
from mlprof.analysis.advisor.rules_shapes import shape_driven_steps
from mlprof.analysis.call_sites import site_samples_by_step
from mlprof.tables.names import COMPILE_SQL

__all__ = ["step_outliers", "same_work_steps"]

# The phases whose time is ops' time: an excess there, with the same ops, is the ops running slower.
_OP_PHASES = ("forward", "backward", "optimizer", "other")
# A step runs "the same ops" when its op count is within this many of the typical step's (or this share) ...
SAME_OPS_SLACK = 2
SAME_OPS_SLACK_SHARE = 0.02
# ... and none of its ops has a name that fewer than this share of the window's steps run.
RARE_NAME_SHARE = 0.5
# Judged only where a typical step runs this many ops: with a handful, "the same ops" is weak evidence (one
# op slower every third step may be its own input's doing).
SAME_OPS_MIN_OPS = 20


def same_work_steps(ctx: AdvisorContext) -> set[tuple[int, int]]:
    """(window, step) of the steps that ran the typical step's ops: their op count within ``SAME_OPS_SLACK`` (or
    ``SAME_OPS_SLACK_SHARE``) of the window's median step, and no op whose name fewer than ``RARE_NAME_SHARE``
    of the window's steps run; none in a window whose median step runs fewer than ``SAME_OPS_MIN_OPS`` ops."""
    rows = ctx.store.rows(f"""
        WITH ops AS (SELECT window_index, step, name FROM host_ops WHERE step IS NOT NULL AND category = 'cpu_op'),
        names AS (SELECT window_index, name, count(DISTINCT step) AS in_steps FROM ops GROUP BY ALL),
        windows AS (SELECT window_index, count(DISTINCT step) AS steps FROM ops GROUP BY ALL),
        per_step AS (
            SELECT o.window_index, o.step, count(*) AS ops,
                   count(*) FILTER (WHERE n.in_steps < {RARE_NAME_SHARE} * w.steps) AS rare_ops
            FROM ops o JOIN names n USING (window_index, name) JOIN windows w USING (window_index) GROUP BY ALL),
        typical AS (SELECT window_index, median(ops) AS ops FROM per_step GROUP BY ALL)
        SELECT p.window_index, p.step FROM per_step p JOIN typical t USING (window_index)
        WHERE p.rare_ops = 0 AND t.ops >= {SAME_OPS_MIN_OPS}
          AND abs(p.ops - t.ops) <= greatest({SAME_OPS_SLACK}, {SAME_OPS_SLACK_SHARE} * t.ops)""")
    return {(int(w), int(s)) for w, s in rows}


def _compile_ns_by_step(ctx: AdvisorContext) -> dict[tuple[int, int], int]:
    """(window, step) -> time torch.compile spent compiling in it (the longest of the nested compile spans)."""
    rows = ctx.store.rows(f"""
        SELECT window_index, step, max(ns) FROM (
            SELECT window_index, step, name, sum(dur_ns) AS ns FROM host_ops
            WHERE step IS NOT NULL AND category <> 'python_function' AND {COMPILE_SQL} GROUP BY ALL)
        GROUP BY ALL""")
    return {(int(w), int(s)): int(ns) for w, s, ns in rows}


# The stack samples a line needs in the slow steps before step_outliers names it as their work.
_SITE_MIN_SAMPLES = 5


def slow_steps_site(ctx: AdvisorContext, slow, excess_ns: float) -> dict | None:
    """The user's line whose sampled time sits in the slow steps (a checkpoint, an evaluation, a histogram
    every Nth step): the most samples per slow step beyond its samples per other step, at least
    :data:`_SITE_MIN_SAMPLES` of them, most of its samples in the slow steps, and at least a quarter of the slow
    steps' excess (``excess_ns``); None where no line is (no samples, or the excess is spread). Ties go to the
    first line and leaf by name."""
    keys = {(s.window, s.step) for s in slow}
    rest = len(ctx.steps) - len(keys)
    counts: dict[str, list] = {}
    for window, step, site, leaf, samples, weight in site_samples_by_step(ctx.store):
        c = counts.setdefault(site, [0, 0, {}, 0])
        c[0 if (int(window), int(step)) in keys else 1] += samples
        c[2][leaf] = c[2].get(leaf, 0) + samples
        c[3] += int(weight or 0)
    best = None
    for site, (in_slow, in_rest, leaves, weight_sum) in sorted(counts.items()):
        extra = in_slow / len(keys) - (in_rest / rest if rest else 0.0)
        if in_slow < _SITE_MIN_SAMPLES or extra <= 0.5 * in_slow / len(keys):
            continue
        if best is None or extra > best[0]:
            est_ns = extra * len(keys) * weight_sum / (in_slow + in_rest)
            leaf = min(leaves.items(), key=lambda kv: (-kv[1], str(kv[0])))[0]
            best = (extra, site, in_slow, leaf, est_ns)
    if best is None:
        return None
    _extra, site, samples, leaf, est_ns = best
    if est_ns < 0.25 * excess_ns:
        return None
    # What to call it: the library function the line was in (torch.serialization.save), else its own function.
    callee = library_call(ctx, "python", site)
    return {"call_site": site, "leaf": leaf, "samples": samples, "self_ns": int(est_ns), "library_call": callee,
            "what": callee or site.rsplit(" ", 1)[-1], "where": short_site(site).split(" ", 1)[0]}


def _every(slow) -> int | None:
    """N where the slow steps come every Nth step (most gaps between them equal, N > 1)."""
    numbers = sorted(s.step for s in slow if s.step is not None)
    gaps = [b - a for a, b in zip(numbers, numbers[1:])]
    if len(gaps) < 2:
        return None
    gap = statistics.mode(gaps)
    return gap if gap > 1 and gaps.count(gap) >= 0.8 * len(gaps) else None


def _ordinal(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


def _outliers(steps, time_ns, th: Thresholds) -> tuple[list, float, float]:
    """(slow steps, median, excess over the median) with each step's time given by ``time_ns``."""
    median = statistics.median(time_ns(s) for s in steps)
    slow = [s for s in steps if time_ns(s) > th.step_outlier_ratio * median]
    return slow, median, sum(time_ns(s) - median for s in slow)


def step_outliers(ctx: AdvisorContext, th: Thresholds) -> list[Finding]:
    """Steps much slower than the median step (see the module doc for the ones left out)."""
    if len(ctx.steps) < 3:
        return []
    waits = ctx.cpu_wait_ns

    slow, median, excess_ns = _outliers(ctx.steps, lambda s: s.dur_ns, th)
    if not slow:
        return []
    # A step slow by a garbage-collector pause (half its excess or more) is gc_pauses' finding, which knows
    # whether pauses recur: one full collection must not make a second warning here. The same for a step slow
    # by torch.compile compiling in it: recompilation's finding (a recompile after the first steps was ranked
    # under its own 270 ms step at torch's default threads).
    compiling = _compile_ns_by_step(ctx)
    unexplained = [s for s in slow
                   if max(s.gc_ns, compiling.get((s.window, s.step), 0)) < 0.5 * (s.dur_ns - median)]
    if len(unexplained) < len(slow):
        if not unexplained:
            return []
        slow, excess_ns = unexplained, sum(s.dur_ns - median for s in unexplained)
    parts = tuple(HOST_FIELDS.values())
    typical = {p: statistics.median(getattr(s, p) for s in ctx.steps) for p in parts}
    same_work = same_work_steps(ctx)

    def waited(s) -> bool:
        """Slow by waiting for a core: half the excess or more (with intra-op threads the stepping thread also
        waits, blocked or spinning, for helpers that wait, so its own wait explains only part)."""
        return bool(waits) and waits.get((s.window, s.step), 0) >= 0.5 * (s.dur_ns - median)

    def same_ops_slower(s) -> bool:
        """The typical step's ops and no others, with half the excess or more inside them."""
        in_ops = sum(getattr(s, HOST_FIELDS[p]) - typical[HOST_FIELDS[p]] for p in _OP_PHASES)
        return (s.window, s.step) in same_work and in_ops >= 0.5 * (s.dur_ns - median)

    def by_the_machine(s) -> bool:
        return waited(s) or same_ops_slower(s)

    machine = [s for s in slow if by_the_machine(s)]
    waited_ns = 0
    left_out = 0  # outliers left out because other, code-made outliers remain
    if machine:
        rest = [s for s in slow if not by_the_machine(s)]
        rest_excess = sum(s.dur_ns - median for s in rest)
        rest_severity = severity_for(ctx.share(rest_excess), th.step_outlier_warn_share, th) if rest else None
        if rest_severity in (None, "info") or len(rest) < th.step_outlier_min_count:
            waited_ns = sum(waits.get((s.window, s.step), 0) for s in machine) if waits else 0
            slowed = machine
        else:
            # Outliers remain besides those: they are the finding (at load 14, 80 of 200 steps preempted for
            # 20 ms and 3 slow by their own work were one critical 79% false alarm).
            left_out = len(machine)
            slow, excess_ns = rest, rest_excess
            slowed = []
    else:
        slowed = []
    share = ctx.share(excess_ns)
    severity = severity_for(share, th.step_outlier_warn_share, th)
    if severity is None:
        return []
    if len(slow) < th.step_outlier_min_count or slowed:
        severity = "info"
    # Slow steps that are simply the big batches are dynamic_shapes' finding, not periodic work.
    driven = shape_driven_steps(ctx)
    if driven:
        severity = "info"
    # Steps that get slower one after the other are work_growth's finding: the late ones are not periodic work.
    growing = None if driven else growing_step_time(ctx, th)
    if growing is not None:
        severity = "info"
    # Which part of the step grew: each outlier's columns against the median of all steps.
    steps = []
    for s in sorted(slow, key=lambda s: -s.dur_ns):
        grown = max(parts, key=lambda p: getattr(s, p) - typical[p])
        steps.append({"step": s.step, "window": s.window, "dur_ns": s.dur_ns,
                      "ratio_to_median": round(s.dur_ns / median, 2), **{p: getattr(s, p) for p in parts},
                      "free_ns": s.free_ns, "grew_most": grown.removesuffix("_ns"),
                      "grew_most_by_ns": int(getattr(s, grown) - typical[grown]),
                      "same_ops_as_typical": (s.window, s.step) in same_work})
    same_ops_slowed = [s for s in slowed if not waited(s)]
    title = (f"{len(slow)} of {len(ctx.steps)} steps take over {th.step_outlier_ratio:g}x the median "
             f"step ({median / 1e6:.2f} ms)")
    # What the slow steps run that the others do not, where the samples say it (code-made outliers only).
    site = None if slowed or driven or growing is not None else slow_steps_site(ctx, slow, excess_ns)
    every = _every(slow)
    if site:
        title += f"{f', every {_ordinal(every)} step,' if every else ''} running {site['what']} at {site['where']}"
    if left_out:
        kinds = [s for s in machine if waited(s)], [s for s in machine if not waited(s)]
        title += " besides " + " and ".join(filter(None, [
            "those slow by waiting for a CPU core" if kinds[0] else "",
            f"{len(kinds[1])} that ran a typical step's ops, slower (the machine)" if kinds[1] else ""]))
    elif slowed:
        title += (", slow by the machine, not the code: "
                  + "; ".join(filter(None, [
                      f"{waited_ns / 1e6:.1f} ms waiting for a CPU core measured in them" if waited_ns else "",
                      f"{len(same_ops_slowed)} ran the same ops as a typical step, slower"
                      if same_ops_slowed else ""])))
    if driven:
        fix = f"Step time follows the input's size (rank correlation {driven['rho']:.2f}): see dynamic_shapes."
    elif growing is not None:
        fix = (f"Step time grows with the step number ({growing.slope / 1e6:.2f} ms per step): the slow steps are "
               "the late ones, see work_growth.")
    elif slowed:
        fix = ("Nothing to change in the code for these steps: they waited for a CPU core that other processes "
               "held, or ran exactly the ops of a typical step, each slower (another process or VM on the host; "
               "with several intra-op threads, one helper thread preempted holds the whole op). Run on a quieter "
               "machine, give the job its cores (see cpu_contention), or use fewer intra-op threads than cores.")
    elif site:
        fix = (f"The slow steps run {site['what']} at {site['where']}"
               + (f" (every {_ordinal(every)} step)" if every else "") + ": move it off the training thread (a "
               "background thread or process for checkpoints and logs), run it less often, or spread it over "
               "steps.")
    else:
        fix = ("Compare an outlier step with a typical one (`mlprof compare` on two captures, or the timeline): "
               "periodic work (checkpointing, evaluation, logging, GC, recompilation, data loader refills) "
               "or interference from other processes makes single steps slow; move it off the step or spread it.")
    return [Finding(
        id="step_outliers", severity=severity, share=round(share, 4), impact_ns=int(excess_ns),
        title=title,
        evidence=Evidence(metrics={"median_step_ns": int(median), "outliers": len(slow),
                                   "waiting_steps_left_out": bool(left_out), "machine_slowed_left_out": left_out,
                                   "excess_ns": int(excess_ns),
                                   **({"waited_for_cpu_ns": int(waited_ns)} if waited_ns else {}),
                                   **({"same_ops_slower_steps": len(same_ops_slowed)} if same_ops_slowed else {}),
                                   "every_nth_step": every},
                          steps=steps[:10], call_sites=[site] if site else []),
        fix=fix, rank=ctx.rank)]
