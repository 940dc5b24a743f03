"""Rules about growth across steps: memory that is never given back, work that grows with the step number.

The trends come from :mod:`mlprof.analysis.growth`; these rules judge them and say where they come from.
"""

from __future__ import annotations

from mlprof.analysis.advisor.context import AdvisorContext
from mlprof.analysis.advisor.model import Evidence, Finding, Thresholds
from mlprof.analysis.growth import (
    MIN_TREND_POINTS,
    AllocatorGrowth,
    Trend,
    allocator_growth,
    op_time_trends,
    phase_trends,
    rss_growth,
    level_shifts,
    step_time_series,
    step_time_trend,
    trend,
)
from mlprof.analysis.compare_speed import steps_at_one_speed
from mlprof.analysis.steps import HOST_FIELDS
from mlprof.tables.names import step_span_sql

__all__ = ["memory_growth", "work_growth", "growing_step_time"]

_MB = 2**20
# Judged steps of a window that must each leave blocks allocated for the allocator to call it growth.
_RETAINED_STEPS_SHARE = 0.75
# Host ops judged for growing work: the model's ops, as dominant_op counts them.
_OP_FILTER = ("category = 'cpu_op' AND NOT coalesce(folded, false) AND step IS NOT NULL "
              f"AND NOT {step_span_sql()}")
# An op (or phase) whose growth is at least this share of the step's growth is what grows ...
_OWNS_GROWTH = 0.5
# ... and a phase owns its whole time only when its time grows by at least this share of where it started.
_PHASE_OWNS_GROWTH = 0.5
# ... when its own rise has a p-value below this multiple of growth_p_value.
_COMPONENT_P = 5

_MEMORY_FIX = ("Something keeps a reference to every step's tensors. Look for a list or dict that grows each "
               "step: `losses.append(loss)` keeps the loss and its whole graph (with the activations) alive, "
               "log `loss.item()` instead; evaluate under `torch.no_grad()`; cache `t.detach()` (or a bounded "
               "cache) instead of tensors that require grad; do not concatenate onto a tensor every step.")


def _site(sites: list[dict]) -> str | None:
    if not sites:
        return None
    site = sites[0].get("call_site") or sites[0].get("module")
    if not site:
        return None
    path, _, rest = str(site).partition(":")
    return f"{path.rsplit('/', 1)[-1]}:{rest}" if rest else str(site)


def _op_sites(ctx: AdvisorContext, op_ids: list[int]) -> list[dict]:
    """The user's lines (with_stack, else the Python sampler) and the module behind a set of ops."""
    ids = ",".join(str(int(i)) for i in op_ids if i is not None) or "NULL"
    where = f"op_id IN ({ids})"
    sites = ctx.call_sites(where, []) or ctx.sampled_call_sites(where, [])
    if sites:
        return sites
    modules = ctx.store.dicts(f"""
        WITH o AS (SELECT op_id, window_index, tid, start_ns FROM host_ops WHERE {where}),
        inner_most AS (SELECT o.op_id, arg_max(m.module_path, m.depth) AS module, arg_max(m.module_type, m.depth) AS type
                       FROM o JOIN module_calls m ON m.window_index = o.window_index AND m.tid = o.tid
                        AND o.start_ns >= m.start_ns AND o.start_ns < m.end_ns GROUP BY o.op_id)
        SELECT module || ' (' || type || ')' AS module, count(*) AS count FROM inner_most
        GROUP BY 1 ORDER BY count DESC, module LIMIT 3""")
    return [{"call_site": None, "module": m["module"], "count": m["count"]} for m in modules]


def _allocator_finding(ctx: AdvisorContext, th: Thresholds, dev: AllocatorGrowth) -> dict | None:
    """Growth the allocator saw in the window (profile_memory), or None."""
    if dev.judged_steps < 3 or dev.retained_steps < max(3, _RETAINED_STEPS_SHARE * dev.judged_steps):
        return None
    per_step = dev.retained_median_bytes
    if dev.trend is not None and dev.trend.p_value < th.growth_p_value and dev.trend.slope > 0:
        per_step = max(per_step, dev.trend.slope)
    total = per_step * dev.judged_steps
    if per_step <= 0 or total < th.memory_growth_min_bytes:
        return None
    if dev.device_type == 0:
        left = _host_available_bytes(ctx)
        where = "CPU allocator memory"
    else:
        left = dev.capacity_bytes - dev.allocated_last_bytes if dev.capacity_bytes else None
        where = f"Device {dev.device_id} allocator memory"
    for site in dev.sites:
        site["call_sites"] = _op_sites(ctx, site.pop("op_ids") or [])
    return {"source": "allocator", "where": where, "bytes_per_step": per_step, "steps": dev.judged_steps,
            "span": f"{dev.judged_steps} profiled steps",
            "left_bytes": left, "last_step": max(r["step"] for r in dev.steps),
            "metrics": {"device_type": dev.device_type, "device_id": dev.device_id,
                        "retained_median_bytes": dev.retained_median_bytes,
                        "retained_steps": dev.retained_steps, "judged_steps": dev.judged_steps,
                        "allocated_last_bytes": dev.allocated_last_bytes, "capacity_bytes": dev.capacity_bytes},
            "sites": dev.sites}


def _host_available_bytes(ctx: AdvisorContext) -> int | None:
    rows = ctx.store.rows("""SELECT arg_max(value, ts_ns) FROM counters
                             WHERE name = 'host_memory' AND series = 'available_bytes'""")
    return int(rows[0][0]) if rows and rows[0][0] is not None else None


def memory_growth(ctx: AdvisorContext, th: Thresholds) -> list[Finding]:
    """Memory that grows with every step: the job's RSS after the profiled window (host samples), and with
    profile_memory the allocator's blocks each step leaves allocated, with the ops that allocated them."""
    seen = []
    rss = rss_growth(ctx.store)
    t = rss.trend
    if (t is not None and t.p_value < th.growth_p_value and t.still_growing()
            and t.growth >= th.memory_growth_min_bytes):
        seen.append({"source": "rss", "where": "The process's memory (RSS)", "bytes_per_step": t.slope,
                     "steps": round(t.last_x - t.first_x, 1), "left_bytes": rss.available_bytes,
                     "span": f"steps {t.first_x:.0f}-{t.last_x:.0f}, after the profiled window",
                     "last_step": int(t.last_x),
                     "metrics": {"samples": rss.samples, "first_step": round(rss.first_step, 1),
                                 "last_step": round(rss.last_step, 1), "step_ns": int(rss.step_ns),
                                 "rss_first_bytes": rss.rss_first_bytes, "rss_last_bytes": rss.rss_last_bytes,
                                 "p_value": round(t.p_value, 6)},
                     "sites": []})
    allocator = [f for f in (_allocator_finding(ctx, th, d) for d in allocator_growth(ctx.store)) if f]
    if not seen and not allocator:
        return []
    main = max(seen + allocator, key=lambda f: f["bytes_per_step"])
    sites = next((f["sites"] for f in allocator if f["sites"]), [])
    per_step = main["bytes_per_step"]
    steps_to_oom = main["left_bytes"] / per_step if main["left_bytes"] else None
    oom_step = int(main["last_step"] + steps_to_oom) if steps_to_oom is not None else None
    severity = ("critical" if steps_to_oom is not None and steps_to_oom <= th.memory_growth_critical_steps
                else "warning")
    top_site = sites[0] if sites else None
    where_site = ""
    if top_site:
        line = _site(top_site["call_sites"])
        where_site = f", never freed: {top_site['op']}" + (f" at {line}" if line else "")
    oom = (f"; {main['left_bytes'] / 2**30:.1f} GiB left: out of memory in ~{steps_to_oom:,.0f} steps (step "
           f"{oom_step:,})" if steps_to_oom is not None else "")
    metrics = {"source": main["source"], "bytes_per_step": int(per_step), "mb_per_step": round(per_step / _MB, 2),
               "steps_judged": main["steps"], "memory_left_bytes": main["left_bytes"],
               "steps_to_oom": int(steps_to_oom) if steps_to_oom is not None else None, "oom_step": oom_step,
               **main["metrics"]}
    if rss.reason:
        metrics["rss_not_judged"] = rss.reason
    for other in seen + allocator:
        if other is not main:
            metrics[f"{other['source']}_bytes_per_step"] = int(other["bytes_per_step"])
    fix = _MEMORY_FIX + ("" if sites else " Record with --profile-memory to see the ops whose memory is never freed.")
    return [Finding(
        id="memory_growth", severity=severity, share=0.0, impact_ns=0,
        title=f"{main['where']} grows {per_step / _MB:.1f} MB per step ({main['span']}){oom}{where_site}",
        evidence=Evidence(metrics=metrics,
                          ops=[{k: s[k] for k in ("op", "bytes", "blocks", "steps")} for s in sites],
                          call_sites=top_site["call_sites"] if top_site else []),
        fix=fix, rank=ctx.rank)]


def growing_step_time(ctx: AdvisorContext, th: Thresholds) -> Trend | None:
    """The steps' time trend when it is growth worth a finding (step_outliers defers to it), else None."""
    if len(ctx.steps) < MIN_TREND_POINTS:
        return None
    t = step_time_trend(ctx.steps, ctx.cpu_wait_ns)
    if not _grows(t, th) or not t.still_growing(0.25) or _host_slowed(ctx, th):
        return None
    return t


def _grows(t: Trend | None, th: Thresholds) -> bool:
    """A steady rise (Mann-Kendall p under ``growth_p_value``) of ``work_growth_warn_share`` of its start."""
    base = t.at(t.first_x) if t else 0
    return (t is not None and t.slope > 0 and t.p_value < th.growth_p_value and base > 0
            and t.growth / base >= th.work_growth_warn_share)


def _host_slowed(ctx: AdvisorContext, th: Thresholds) -> bool:
    """The steps do not grow once each is divided by the host's speed around it (the speed probe timed
    between a window's steps, analysis/compare_speed.py): the host slowed, the work did not grow. A shared
    VM runs the same code up to 40% slower for seconds at a time; a clean 10-step run's matmuls "grew" 37%
    that way (aten::mm in backward, 14 -> 21 ms steps, nothing else running beside it)."""
    rows = ctx.store.rows("SELECT start_ns, dur_ns, cpu_wait_ns, speed_probe_ns, step FROM steps "
                          "WHERE dur_ns > 0 ORDER BY start_ns")
    # Each step against the 3 probes nearest it: compare's 9 smooth a steady drift away at a window's ends,
    # which a trend would read as growth.
    at_speed = steps_at_one_speed([r[:4] for r in rows], neighbours=1)
    if at_speed is None:
        return False  # no probes (older captures, imported traces): the wall-time trend stands
    judged = trend([float(r[4]) for r in rows], at_speed.per_probe)
    return judged is not None and not _grows(judged, th)


def _mostly_growth(pt: Trend) -> bool:
    """A phase whose own time at least half again grows over the window: its time is the growing work.
    A big phase that only creeps (a per-step torch.save a little slower as the page cache fills) is the
    finding of the rule that names the phase (host_outside_ops, gc_pauses...); growth claims its excess only."""
    start = pt.at(pt.first_x)
    return start <= 0 or pt.growth >= _PHASE_OWNS_GROWTH * start


def _host_slowing(t: Trend, owner: Trend | None) -> bool:
    """The rest of the step (the step less the op or phase that carries the rise) rose by at least half as
    much, relatively, as that owner: everything slowed, not one piece of work grew. A tensor concatenated
    onto every step multiplies its op's time while the rest stays flat; a loaded host stretches them alike."""
    if owner is None:
        return False
    owner_base = owner.at(owner.first_x)
    rest_base = t.at(t.first_x) - owner_base
    if owner_base <= 0 or rest_base <= 0:
        return False
    owner_rise = owner.growth / owner_base
    rest_rise = (t.growth - owner.growth) / rest_base
    return owner_rise > 0 and rest_rise >= 0.5 * owner_rise


def work_growth(ctx: AdvisorContext, th: Thresholds) -> list[Finding]:
    """Step time that grows with the step number (a tensor concatenated onto every step, a list scanned every
    step): the trend, the phase and op that grow, and the line behind them."""
    if len(ctx.steps) < MIN_TREND_POINTS:
        return _too_few_steps(ctx, th)
    t = growing_step_time(ctx, th)
    if t is None:
        return []
    base = t.at(t.first_x)
    phases = {p: pt for p, pt in phase_trends(ctx.steps, HOST_FIELDS).items() if pt.slope > 0}
    # The phase that grows most among those that rise steadily (a noisy phase's slope is not its growth).
    steady = {p: pt for p, pt in phases.items() if pt.p_value < _COMPONENT_P * th.growth_p_value} or phases
    phase = max(steady, key=lambda p: steady[p].slope, default=None)
    # The step's rise is established; which op carries it needs less proof.
    ops = op_time_trends(ctx.store, _OP_FILTER, _COMPONENT_P * th.growth_p_value)
    op = ops[0] if ops and ops[0]["trend"].slope >= _OWNS_GROWTH * t.slope else None
    if op is not None:
        sites = (ctx.call_sites("name = ? AND " + _OP_FILTER, [op["name"]])
                 or ctx.sampled_call_sites("name = ? AND " + _OP_FILTER, [op["name"]]))
    else:
        sites = ctx.phase_call_sites(phase) if phase else []
    line = _site(sites)
    what = op["name"] if op else f"the {phase} phase" if phase else "the step"
    excess_ns = sum(max(0.0, t.at(s.step) - base) for s in ctx.steps)
    # The time at stake: all of the op or phase that carries the growth (the fix removes it, not only its
    # growth), else the growth itself. It is the time dominant_op or host_outside_ops would name: growth is
    # their cause and comes first among equals (RULES order).
    owner_ns = 0
    if op is not None:
        owner_ns = op["self_ns"]
    elif phase and steady.get(phase) is not None and steady[phase].p_value < _COMPONENT_P * th.growth_p_value \
            and steady[phase].slope >= _OWNS_GROWTH * t.slope and _mostly_growth(steady[phase]):
        owner_ns = sum(getattr(s, HOST_FIELDS[phase]) or 0 for s in ctx.steps)
    impact_ns = max(excess_ns, owner_ns)
    share = ctx.share(impact_ns)
    growth = t.growth / base
    severity = "critical" if growth >= 1.0 or share >= th.critical_share else "warning"
    # Growing work sits in what grows: an op, or a phase, carries half the rise or more. A rise spread over
    # every phase is the whole step slowing (a loaded host's caches and cores; 1.4 -> 3.0 ms over 200 steps
    # of a healthy twin at load 14, no phase over a third of it): worth a line, not a warning.
    spread = op is None and not (phase and phases[phase].slope >= _OWNS_GROWTH * t.slope)
    # ... and growing work grows alone: the rest of the step stays as it was. A healthy LSTM's backward
    # "grew" 42% over 200 steps at load 14 with the rest of its step (shapes are not recorded by default).
    same = not spread and _host_slowing(t, op["trend"] if op else phases.get(phase))
    # ... and growing work rises on every step: jumps between flat levels are the machine (or the job's
    # phase) changing mid-window. Their slow steps are step_outliers' or cpu_contention's to explain.
    jump = level_shifts(*step_time_series(ctx.steps, ctx.cpu_wait_ns))
    if spread or same or jump:
        severity = "info"
    double_in = base / t.slope
    if jump:
        where = " and ".join(f"{at:.0f}" for at in jump.at_x)
        levels = " -> ".join(f"{level / 1e6:.2f}" for level in jump.levels)
        how = (f"in {'one jump' if len(jump.at_x) == 1 else 'two jumps'} at step{'s' if len(jump.at_x) > 1 else ''} "
               f"{where} ({levels} ms, flat between): the machine or the job changed mid-window, not work growing "
               "each step")
    elif spread:
        how = "spread over the whole step, no op or phase carrying half of it (the host slowing, not growing work?)"
    else:
        how = (f"in {what}" + (f" at {line}" if line else "")
               + (", with the rest of the step rising alike (the host slowing, not growing work?)" if same else ""))
    return [Finding(
        id="work_growth", severity=severity, share=round(share, 4), impact_ns=int(impact_ns),
        title=f"Step time grows {_per_step(t.slope)} per step ({growth:.0%} over steps {t.first_x:.0f}-"
              f"{t.last_x:.0f}), " + how,
        evidence=Evidence(
            metrics={"ns_per_step": int(t.slope), "first_step_ns": int(base), "growth_ns": int(t.growth),
                     "growth_share": round(growth, 4), "excess_ns": int(excess_ns), "steps": t.n, "p_value": round(t.p_value, 6),
                     "steps_to_double": round(double_in, 1), "phase": phase, "spread": spread, "rest_rose_alike": same,
                     "jump_at_step": int(jump.at_x[0]) if jump else None,
                     "second_jump_at_step": int(jump.at_x[1]) if jump and len(jump.at_x) > 1 else None,
                     "phase_ns_per_step": int(phases[phase].slope) if phase else None,
                     "op": op["name"] if op else None,
                     "op_ns_per_step": int(op["trend"].slope) if op else None},
            # The latest steps first: the growth makes them the slowest.
            steps=sorted(({"step": s.step, "window": s.window, "dur_ns": s.dur_ns} for s in ctx.steps),
                         key=lambda r: -r["step"])[:50],
            ops=[{"name": o["name"], "ns_per_step": int(o["trend"].slope), "self_ns": o["self_ns"],
                  "steps": o["steps"]} for o in ops],
            call_sites=sites),
        fix=(f"Work in {what} grows with every step: at this rate a step takes twice as long after another "
             f"~{double_in:,.0f} steps. Look for a tensor or list that keeps growing and is processed whole each "
             "step (`buf = torch.cat([buf, x])`, a list scanned for membership, a history re-stacked): keep a "
             "running statistic, a bounded window (collections.deque(maxlen=N)), a preallocated buffer, or a "
             "set/dict instead."),
        rank=ctx.rank)]


def _per_step(ns: float) -> str:
    """A per-step rise in the unit that shows it (a healthy-looking 0.00 ms is 4 us, 0.1% of a 4 ms step)."""
    return f"{ns / 1e6:.2f} ms" if ns >= 10_000 else f"{ns / 1e3:.1f} us"


def _too_few_steps(ctx: AdvisorContext, th: Thresholds) -> list[Finding]:
    """3 or 4 steps, each slower than the one before, by much: a hint that needs more steps to be a finding."""
    steps = sorted(ctx.steps, key=lambda s: s.step)
    durs = [s.dur_ns for s in steps]
    if len(steps) < 3 or any(b <= a for a, b in zip(durs, durs[1:])) or durs[-1] < 1.5 * durs[0]:
        return []
    return [Finding(
        id="work_growth", severity="info", share=0.0, impact_ns=0,
        title=f"Each of the {len(steps)} profiled steps is slower than the one before ({durs[0] / 1e6:.1f} -> "
              f"{durs[-1] / 1e6:.1f} ms): too few steps to call it a trend (>= {MIN_TREND_POINTS})",
        evidence=Evidence(metrics={"steps": len(steps), "min_steps": MIN_TREND_POINTS},
                          steps=[{"step": s.step, "window": s.window, "dur_ns": s.dur_ns} for s in steps]),
        fix=f"Record more steps (`mlprof run --active {4 * MIN_TREND_POINTS}`) to tell growing work from noise.",
        rank=ctx.rank)]
