"""Monitor mode's whole-job series (``job_steps``) and its windows (``monitor_windows``): rows, an overview,
periodic stalls and each triggered window against the baseline window.

A step is a stall when it is anomalous by :mod:`mlprof.step_anomaly` against the median and MAD of the
steps it is judged with: the steps outside every window for the whole-job series, and a window's own steps
inside a window (a profiled step is slower by design). Only full-resolution rows (``steps = 1``) are judged.
"""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import dataclass, field

from mlprof.step_anomaly import anomaly_threshold_ns, is_anomalous, work_ns
from mlprof.tables.store import TableStore

__all__ = ["job_step_rows", "job_step_series", "SERIES_POINTS", "monitor_overview", "PeriodicStall", "periodic_stall", "window_vs_baseline",
           "MIN_STALLS"]

# Stalls needed before a period is named, and the share of the gaps between them that must agree with it.
MIN_STALLS = 4
_PERIOD_AGREEMENT = 0.6
# Points of the whole-job chart: a job of millions of steps is drawn from this many buckets of steps.
SERIES_POINTS = 2_000


def job_step_rows(store: TableStore, step: int | None = None) -> list[dict]:
    """Every monitored step in order (job_steps.csv)."""
    cond, params = ("WHERE step = ?", [step]) if step is not None else ("", [])
    return store.dicts(f"""SELECT step, steps, start_ns, wall_ns, cpu_ns, wait_ns, data_ns, gc_ns, rss_bytes,
                                  covered_by_window, warmup, trigger FROM job_steps {cond} ORDER BY step""", params)


def job_step_series(store: TableStore, points: int = SERIES_POINTS) -> list[dict]:
    """The whole-job step times in at most ``points`` buckets of consecutive steps, in step order: per bucket
    its steps, the median, mean and slowest step (wall ns per step; a stall shows in the slowest even when a
    bucket holds thousands of steps), the mean wait for a core, and the window that recorded any of them."""
    first, last = store.rows("SELECT min(step), max(step + steps - 1) FROM job_steps")[0]
    if first is None:
        return []
    width = max(1, -(-(int(last) - int(first) + 1) // max(1, points)))  # steps per bucket, rounded up
    return store.dicts("""
        SELECT min(step) AS first_step, max(step + steps - 1) AS last_step, sum(steps) AS steps,
               CAST(median(wall_ns / steps) AS BIGINT) AS median_ns,
               CAST(sum(wall_ns) / sum(steps) AS BIGINT) AS mean_ns,
               CAST(max(wall_ns / steps) AS BIGINT) AS max_ns,
               CAST(sum(coalesce(wait_ns, 0)) / sum(steps) AS BIGINT) AS wait_ns,
               min(covered_by_window) AS "window"
        FROM job_steps GROUP BY (step - ?) // ? ORDER BY first_step""", [int(first), width])


def monitor_overview(store: TableStore) -> dict | None:
    """Steps monitored and the windows opened (None: the capture was not monitored)."""
    steps, records, most = store.rows("SELECT sum(steps), count(*), max(steps) FROM job_steps")[0]
    if not records:
        return None
    windows = store.dicts("""SELECT "window", reason, detail, trigger_step, first_step, last_step, skipped
                             FROM monitor_windows ORDER BY trigger_step""")
    return {"steps": int(steps), "records": int(records), "steps_per_record_max": int(most),
            "windows": [w for w in windows if w["skipped"] is None],
            "skipped": [w for w in windows if w["skipped"] is not None]}


@dataclass
class PeriodicStall:
    period_steps: int
    stalls: int  # stalled steps outside windows
    first_step: int
    stall_ns: int  # median excess of a stalled step over the median step
    median_ns: int
    total_excess_ns: int
    job_wall_ns: int
    window: int | None = None  # the window that recorded stalled steps
    window_stalled_steps: list[int] = field(default_factory=list)
    call_sites: list[dict] = field(default_factory=list)  # where the stalled steps' samples are, beyond normal


def _stalled(rows: list[dict]) -> tuple[list[dict], float]:
    works = [work_ns(r["wall_ns"], r["wait_ns"]) for r in rows]
    if len(works) < 8:
        return [], 0.0
    median = statistics.median(works)
    mad = statistics.median(abs(w - median) for w in works)
    threshold = anomaly_threshold_ns(median, mad)
    return [r for r, w in zip(rows, works) if is_anomalous(w, (r["wait_ns"] or 0) > 0, threshold)], median


def periodic_stall(store: TableStore) -> PeriodicStall | None:
    """A stall that repeats every N steps in the whole-job series, with the call site its window saw."""
    rows = store.dicts("""SELECT step, start_ns, wall_ns, wait_ns, covered_by_window FROM job_steps
                          WHERE steps = 1 AND NOT warmup ORDER BY step""")
    outside = [r for r in rows if r["covered_by_window"] is None]
    stalls, median = _stalled(outside)
    if len(stalls) < MIN_STALLS:
        return None
    gaps = [b["step"] - a["step"] for a, b in zip(stalls, stalls[1:])]
    period, _n = Counter(gaps).most_common(1)[0]
    if period < 2 or sum(1 for g in gaps if g % period == 0) < _PERIOD_AGREEMENT * len(gaps):
        return None
    excess = [work_ns(r["wall_ns"], r["wait_ns"]) - median for r in stalls]
    found = PeriodicStall(period_steps=period, stalls=len(stalls), first_step=stalls[0]["step"],
                          stall_ns=int(statistics.median(excess)), median_ns=int(median),
                          total_excess_ns=int(sum(excess)), job_wall_ns=int(sum(r["wall_ns"] for r in rows)))
    for window in sorted({r["covered_by_window"] for r in rows if r["covered_by_window"] is not None}):
        inside = [r for r in rows if r["covered_by_window"] == window]
        hit, _m = _stalled(inside)
        if len(hit) >= 2:
            found.window, found.window_stalled_steps = window, [r["step"] for r in hit]
            found.call_sites = _stall_sites(store, window, hit, [r for r in inside if r not in hit])
            if found.call_sites:
                break
    return found


def _spans_sql(rows: list[dict]) -> str:
    return " UNION ALL ".join(f"SELECT {int(r['start_ns'])} AS s, {int(r['start_ns'] + r['wall_ns'])} AS e"
                              for r in rows) or "SELECT 0 AS s, 0 AS e WHERE false"


def _stall_sites(store: TableStore, window: int, stalled: list[dict], normal: list[dict]) -> list[dict]:
    """Call sites of the samples in the stalled steps, beyond what as much time of the window's normal steps
    holds there; largest first."""
    stalled_ns = sum(r["wall_ns"] for r in stalled) or 1
    normal_ns = sum(r["wall_ns"] for r in normal) or 1
    rows = store.dicts(f"""
        WITH st AS ({_spans_sql(stalled)}), nm AS ({_spans_sql(normal)}),
        s AS (SELECT p.ts_ns, coalesce(p.weight_ns, 0) AS weight_ns, k.call_site, k.leaf
              FROM python_samples p JOIN python_stacks k ON k.window_index = p.window_index AND k.stack_id = p.stack_id
              WHERE p.window_index = ? AND k.call_site IS NOT NULL)
        SELECT call_site, mode() WITHIN GROUP (ORDER BY leaf) AS leaf,
               count(*) FILTER (WHERE EXISTS (SELECT 1 FROM st WHERE s.ts_ns >= st.s AND s.ts_ns < st.e)) AS stalled,
               count(*) FILTER (WHERE EXISTS (SELECT 1 FROM nm WHERE s.ts_ns >= nm.s AND s.ts_ns < nm.e)) AS normal
        FROM s GROUP BY call_site""", [window])
    out = []
    for r in rows:
        beyond = r["stalled"] - r["normal"] * stalled_ns / normal_ns
        if r["stalled"] >= 2 and beyond > 0:
            out.append({"call_site": r["call_site"], "leaf": r["leaf"], "samples": int(r["stalled"]),
                        "normal_samples": int(r["normal"]), "samples_beyond_normal": round(beyond, 1)})
    out.sort(key=lambda r: (-r["samples_beyond_normal"], r["call_site"]))
    return out[:3]


def window_vs_baseline(store: TableStore) -> list[dict]:
    """Each triggered window against the baseline window: median step (wall, work), and the call sites whose
    sampled time per step grew most."""
    windows = store.dicts("""SELECT "window", reason, detail, trigger_step FROM monitor_windows
                             WHERE "window" IS NOT NULL ORDER BY "window\"""")
    base = next((w for w in windows if w["reason"] == "baseline"), None)
    if base is None:
        return []
    per = {}
    for w in windows:
        rows = store.dicts("""SELECT wall_ns, wait_ns FROM job_steps WHERE covered_by_window = ? AND steps = 1
                              AND NOT warmup""", [w["window"]])
        if rows:
            per[w["window"]] = (statistics.median(r["wall_ns"] for r in rows),
                                statistics.median(work_ns(r["wall_ns"], r["wait_ns"]) for r in rows), len(rows))
    if base["window"] not in per:
        return []
    sites = store.dicts("""
        SELECT p.window_index AS w, k.call_site, sum(coalesce(p.weight_ns, 0)) AS ns, count(*) AS samples
        FROM python_samples p JOIN python_stacks k ON k.window_index = p.window_index AND k.stack_id = p.stack_id
        WHERE k.call_site IS NOT NULL GROUP BY ALL""")
    out = []
    b_wall, b_work, b_steps = per[base["window"]]
    for w in windows:
        if w is base or w["window"] not in per:
            continue
        wall, work, steps = per[w["window"]]
        mine = {s["call_site"]: s["ns"] / steps for s in sites if s["w"] == w["window"]}
        theirs = {s["call_site"]: s["ns"] / b_steps for s in sites if s["w"] == base["window"]}
        grown = sorted(((site, ns - theirs.get(site, 0.0)) for site, ns in mine.items()), key=lambda x: -x[1])
        out.append({"window": w["window"], "reason": w["reason"], "detail": w["detail"],
                    "baseline_window": base["window"], "median_step_ns": int(wall), "median_work_ns": int(work),
                    "baseline_median_step_ns": int(b_wall), "baseline_median_work_ns": int(b_work),
                    "steps": steps, "baseline_steps": b_steps,
                    "grown_call_sites": [{"call_site": s, "per_step_ns": int(ns)} for s, ns in grown[:3] if ns > 0]})
    return out
