"""Growth across steps: memory that is never given back, work that grows with the step number.

Pure functions over the tables (docs/analysis.md, "Growth across steps"):

* :func:`rss_growth`: the job's resident memory (``host_memory/job_rss_bytes``
  of the host sampler) over the steps *after* the last profiled window, where
  the profiler is off: inside a window its own event buffers grow the process
  by MBs a step, which is no leak of the job's. The samples are placed on step
  numbers by the manifest's ``job_steps`` and ``last_step_end_ns``.
* :func:`allocator_growth`: with ``profile_memory``, the allocator's live
  total at each step's end, and the blocks allocated in a step that no later
  event of the window frees, by op.
* :func:`trend`: the robust slope of a series (Theil-Sen: the median of the
  pairwise slopes) and the one-sided Mann-Kendall p-value that it rises; a
  warm-up rise that then plateaus shows as a late slope far below the slope.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from mlprof.tables.store import TableStore

__all__ = ["Trend", "trend", "increase_p_value", "RssGrowth", "rss_growth", "AllocatorGrowth",
           "allocator_growth", "step_time_series", "step_time_trend", "phase_trends", "op_time_trends", "MIN_TREND_POINTS",
           "MIN_RSS_SAMPLES", "MIN_RSS_STEPS", "LevelShifts", "level_shifts"]

# Fewer points than this make no trend (a Mann-Kendall p below 0.01 needs 5 rising points and no fall).
MIN_TREND_POINTS = 5
# Host samples after the window needed to judge the process's memory (0.8 s at the default 10 Hz).
MIN_RSS_SAMPLES = 8
# Steps after the window needed to judge it: right after a window the process's memory still settles
# (the allocator's caches and the malloc arenas fill after the profiler's buffers go), and in the diagnosis
# benchmark a leak-free job (optimizer_loop, fixed) rose 1.8 MB a step over the 12 steps it ran after its
# window (21 MB: a warning), where every leaking job was judged over 77-105 steps.
MIN_RSS_STEPS = 20
# Points a trend is fitted on at most (Theil-Sen is quadratic in them): longer series are thinned evenly.
_MAX_POINTS = 400
# A level between jumps is flat when its own fitted rise is under this share of the jump beside it.
_FLAT_LEVEL_RISE = 1 / 3
# The fewest steps a level between jumps may hold; points judged for jumps at most (the costs are quadratic).
_MIN_LEVEL_POINTS = 3
_MAX_LEVEL_POINTS = 120
# Two jumps are named instead of one when they leave under this share of one jump's deviation.
_SECOND_JUMP_GAIN = 0.8
# The first part of the stretch after a window holds the window's trace export (a bump in RSS), not a step.
_EXPORT_SKIP_SHARE = 0.1
# ... and for the first steps after it the process's memory still settles: they are left out too. The leak-free
# optimizer_loop--fixed rose 1.8 MB a step over the 12 steps it ran after its window, and 1.55 MB a step over 18
# (a warning at torch's default threads), where every leaking job was judged over 72-110 steps.
_SETTLE_STEPS = 20


@dataclass(frozen=True)
class Trend:
    """A robust line through (x, y): y ~ intercept + slope * x."""

    n: int
    slope: float
    intercept: float
    p_value: float  # one-sided Mann-Kendall: the chance of a rise this steady in a series without trend
    first_x: float
    last_x: float
    late_slope: float  # the slope over the later half of the points: ~0 where a warm-up rise plateaued

    def at(self, x: float) -> float:
        return self.intercept + self.slope * x

    @property
    def growth(self) -> float:
        """Growth of the fitted line from the first point to the last."""
        return self.slope * (self.last_x - self.first_x)

    def still_growing(self, share: float = 0.5) -> bool:
        """The later half rises at least ``share`` of the whole slope: growth, not a rise then a plateau."""
        return self.slope > 0 and self.late_slope >= share * self.slope


def _theil_sen(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    i, j = np.triu_indices(len(x), k=1)
    dx = x[j] - x[i]
    keep = dx != 0
    if not keep.any():
        return 0.0, float(np.median(y))
    slope = float(np.median((y[j] - y[i])[keep] / dx[keep]))
    return slope, float(np.median(y - slope * x))


@lru_cache(maxsize=64)
def _inversion_counts(n: int) -> tuple[int, ...]:
    """How many permutations of n items have k inversions, for each k (Mahonian numbers)."""
    counts = [1]
    for m in range(2, n + 1):
        nxt = [0] * (len(counts) + m - 1)
        for k, c in enumerate(counts):
            for extra in range(m):
                nxt[k + extra] += c
        counts = nxt
    return tuple(counts)


def increase_p_value(y) -> float:
    """One-sided Mann-Kendall p-value of a rise in ``y`` (in order): exact up to 30 points (ties counted as
    half a fall), a normal approximation beyond."""
    y = np.asarray(y, dtype=float)
    n = len(y)
    if n < 2:
        return 1.0
    i, j = np.triu_indices(n, k=1)
    d = np.sign(y[j] - y[i])
    pairs = len(d)
    falls = float((d < 0).sum()) + 0.5 * float((d == 0).sum())
    if n <= 30:
        counts = _inversion_counts(n)
        return sum(counts[: int(math.floor(falls)) + 1]) / math.factorial(n)
    s = pairs - 2 * falls
    var = n * (n - 1) * (2 * n + 5) / 18
    z = (s - 1) / math.sqrt(var)
    return 0.5 * math.erfc(z / math.sqrt(2))


def _ordered_points(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The points in x order, thinned evenly to :data:`_MAX_POINTS` (Theil-Sen is quadratic in them)."""
    order = np.argsort(x, kind="stable")
    x, y = x[order], y[order]
    if len(x) > _MAX_POINTS:
        pick = np.linspace(0, len(x) - 1, _MAX_POINTS).round().astype(int)
        x, y = x[pick], y[pick]
    return x, y


def trend(x, y) -> Trend | None:
    """The Theil-Sen line and Mann-Kendall p of (x, y); None with fewer than :data:`MIN_TREND_POINTS`."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if len(x) < MIN_TREND_POINTS:
        return None
    x, y = _ordered_points(x, y)
    slope, intercept = _theil_sen(x, y)
    half = len(x) // 2
    late = _theil_sen(x[half:], y[half:])[0] if len(x) - half >= 3 else slope
    return Trend(n=len(x), slope=slope, intercept=intercept, p_value=increase_p_value(y),
                 first_x=float(x[0]), last_x=float(x[-1]), late_slope=late)


@dataclass(frozen=True)
class LevelShifts:
    """A series that moved in one or two jumps between flat levels: the levels fit it better than a line."""

    at_x: tuple[float, ...]  # the first point of each level after the first
    levels: tuple[float, ...]  # median of each level, in order


def _level_costs(y: np.ndarray, min_len: int) -> np.ndarray:
    """cost[i, j]: the absolute deviation of y[i:j] from its median (inf for a stretch under ``min_len``)."""
    n = len(y)
    cost = np.full((n + 1, n + 1), np.inf)
    for i in range(n):
        for j in range(i + min_len, n + 1):
            part = y[i:j]
            cost[i, j] = np.abs(part - np.median(part)).sum()
    return cost


def _best_levels(cost: np.ndarray, n: int, levels: int) -> tuple[float, tuple[int, ...]]:
    """The split of n points into ``levels`` (2 or 3) stretches with the least total deviation: (deviation, cuts)."""
    if levels == 2:
        devs = cost[0, 1:n] + cost[1:n, n]
        k = int(np.argmin(devs))
        return float(devs[k]), (k + 1,)
    best: tuple[float, tuple[int, ...]] = (np.inf, ())
    for a in range(1, n - 1):
        devs = cost[0, a] + cost[a, a + 1:n] + cost[a + 1:n, n]
        b = int(np.argmin(devs))
        if devs[b] < best[0]:
            best = (float(devs[b]), (a, a + 1 + b))
    return best


def level_shifts(x, y) -> LevelShifts | None:
    """One or two jumps between flat levels that explain (x, y) better than a straight line, or None.

    Work that grows with the step number rises a little on every step; a machine that got busier (another
    job took a core halfway through the window, a thread count changed) or a job that changed phase moves
    in jumps. Both make a steep Theil-Sen slope and a tiny Mann-Kendall p. Judged by absolute deviations
    (robust to single slow steps): the best split into two, else three, constant levels beats the Theil-Sen
    line outright, and every level of :data:`MIN_TREND_POINTS` points or more is flat: its own Theil-Sen
    rise is under :data:`_FLAT_LEVEL_RISE` of the jump beside it (a ramp cut into levels still rises within
    each about as much as between them). A level may be as short as :data:`_MIN_LEVEL_POINTS` steps: a
    window whose last 4 steps ran 70% slower (a default-threads job whose host got busier) is two jumps,
    where one jump with the rest called a ramp was read as growth. On simulated series (ramps rising
    25-300% with 2-25% noise and occasional spikes, staircases of one or two 20-100% jumps), the ramps the
    growth test flags are read as jumps 2.0-2.7% of the time and the staircases 77% (one jump with
    levels judged by Mann-Kendall, before: 3.4% and 53%; tests/analysis/test_rules_golden_growth.py)."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if len(x) < 2 * MIN_TREND_POINTS:
        return None
    x, y = _ordered_points(x, y)
    if len(x) > _MAX_LEVEL_POINTS:  # the costs are quadratic in the points
        pick = np.linspace(0, len(x) - 1, _MAX_LEVEL_POINTS).round().astype(int)
        x, y = x[pick], y[pick]
    slope, intercept = _theil_sen(x, y)
    line_dev = float(np.abs(y - intercept - slope * x).sum())
    cost = _level_costs(y, _MIN_LEVEL_POINTS)
    n = len(y)
    found: list[tuple[float, LevelShifts]] = []
    for count in (2, 3):
        dev, cuts = _best_levels(cost, n, count)
        if not dev < line_dev:
            continue
        bounds = (0, *cuts, n)
        parts = [(x[a:b], y[a:b]) for a, b in zip(bounds, bounds[1:])]
        medians = [float(np.median(py)) for _, py in parts]
        jumps = [abs(b - a) for a, b in zip(medians, medians[1:])]
        if _levels_flat(parts, jumps):
            found.append((dev, LevelShifts(at_x=tuple(float(x[c]) for c in cuts), levels=tuple(medians))))
    if len(found) == 2 and found[1][0] < _SECOND_JUMP_GAIN * found[0][0]:
        return found[1][1]  # a second jump that explains a fifth of what one left: both are named
    return found[0][1] if found else None


def _levels_flat(parts: list[tuple[np.ndarray, np.ndarray]], jumps: list[float]) -> bool:
    for i, (px, py) in enumerate(parts):
        if len(py) < MIN_TREND_POINTS:
            continue  # too short to judge: a few steps at one level
        beside = min(jumps[max(i - 1, 0):i + 1])
        rise = abs(_theil_sen(px, py)[0] * (px[-1] - px[0]))
        if not rise < _FLAT_LEVEL_RISE * beside:
            return False
    return True


# ---------------------------------------------------------------- the process's memory (host samples)

@dataclass(frozen=True)
class RssGrowth:
    """The job's resident memory over the unprofiled steps after the last window."""

    samples: int  # host samples judged
    first_step: float  # (fractional) step numbers the samples span
    last_step: float
    step_ns: float  # mean step duration over the stretch
    trend: Trend | None  # bytes against step number; None when too few samples
    rss_first_bytes: int
    rss_last_bytes: int
    available_bytes: int | None  # the host's available memory at the last sample
    reason: str | None = None  # why it could not be judged, when it could not

    @property
    def bytes_per_step(self) -> float:
        return self.trend.slope if self.trend else 0.0

    @property
    def steps_to_oom(self) -> float | None:
        """Steps until the host's available memory is used up at this rate (None: not growing or not known)."""
        if not self.available_bytes or self.bytes_per_step <= 0:
            return None
        return self.available_bytes / self.bytes_per_step


def _not_judged(reason: str, samples: int = 0) -> RssGrowth:
    return RssGrowth(samples, 0.0, 0.0, 0.0, None, 0, 0, None, reason)


def rss_growth(store: TableStore) -> RssGrowth:
    """The job's RSS per step after the last profiled window (``reason`` says why when it cannot be judged)."""
    last_step_end = store.meta("capture.last_step_end_ns")
    job_steps = store.meta("capture.job_steps")
    rows = store.rows("SELECT max(step), max(end_ns) FROM steps")
    window_step, window_end = rows[0] if rows else (None, None)
    if not isinstance(last_step_end, int) or not isinstance(job_steps, int) or window_end is None:
        return _not_judged("the capture does not say when the job's last step ended (captures of mlprof run "
                           "and mlprof.profile say it)")
    steps_after = job_steps - window_step
    span_ns = last_step_end - window_end
    if steps_after < _SETTLE_STEPS + MIN_RSS_STEPS or span_ns <= 0:
        return _not_judged(f"{max(steps_after, 0)} steps ran after the profiled window: too few to tell a trend "
                           f"in the process's memory from its settling (>= {_SETTLE_STEPS + MIN_RSS_STEPS}: "
                           f"{MIN_RSS_STEPS} after the first {_SETTLE_STEPS})")
    step_ns = span_ns / steps_after
    skip_ns = max(int(_EXPORT_SKIP_SHARE * span_ns), int(_SETTLE_STEPS * step_ns))
    samples = store.rows("""
        SELECT ts_ns, max(value) FILTER (WHERE series = 'job_rss_bytes'),
               max(value) FILTER (WHERE series = 'available_bytes')
        FROM counters WHERE name = 'host_memory' AND ts_ns > ? AND ts_ns <= ?
        GROUP BY ts_ns ORDER BY ts_ns""", [window_end + skip_ns, last_step_end])
    samples = [r for r in samples if r[1] is not None]
    if len(samples) < MIN_RSS_SAMPLES:
        return _not_judged(f"{len(samples)} host samples of the job's memory after the profiled window "
                           f"(>= {MIN_RSS_SAMPLES} needed; `mlprof run --host-sys mem` takes them)", len(samples))
    x = [window_step + (ts - window_end) / step_ns for ts, _, _ in samples]
    y = [rss for _, rss, _ in samples]
    available = next((int(a) for _, _, a in reversed(samples) if a is not None), None)
    return RssGrowth(samples=len(samples), first_step=x[0], last_step=x[-1], step_ns=step_ns, trend=trend(x, y),
                     rss_first_bytes=int(y[0]), rss_last_bytes=int(y[-1]), available_bytes=available)


# ---------------------------------------------------------------- the allocator (profile_memory)

@dataclass
class AllocatorGrowth:
    """One device's allocator over the profiled steps."""

    device_type: int
    device_id: int
    steps: list[dict]  # per step: {"window", "step", "allocated_end_bytes", "retained_bytes", "retained_blocks"}
    trend: Trend | None  # live bytes at each step's end, against step number
    judged_steps: int  # steps whose allocations can be told retained (all but each window's last)
    retained_median_bytes: int  # the median over the judged steps of the bytes they left allocated
    retained_steps: int  # judged steps that left at least one block allocated
    sites: list[dict] = field(default_factory=list)  # ops whose blocks were never freed: in most steps, most bytes first
    capacity_bytes: int | None = None  # the device's memory (CUDA: totalGlobalMem), None when not known
    allocated_last_bytes: int = 0

    @property
    def bytes_per_step(self) -> float:
        return self.trend.slope if self.trend else 0.0


def _device_memory_bytes(store: TableStore, device_id: int) -> int | None:
    props = store.meta("deviceProperties")
    if not isinstance(props, list):
        return None
    for p in props:
        if isinstance(p, dict) and p.get("id") == device_id and isinstance(p.get("totalGlobalMem"), (int, float)):
            return int(p["totalGlobalMem"])
    return None


def allocator_growth(store: TableStore, site_limit: int = 5) -> list[AllocatorGrowth]:
    """Per device: live bytes at each step's end, and the blocks each step allocated that the window never
    freed (a block's next event at its address is its free; none in the window: never freed)."""
    out = []
    devices = store.rows("SELECT DISTINCT device_type, device_id FROM memory_events WHERE step IS NOT NULL "
                         "ORDER BY 1, 2")
    for device_type, device_id in devices:
        rows = store.dicts("""
            WITH ev AS (
                SELECT *, lead(size_bytes) OVER w AS next_size
                FROM memory_events WHERE device_type = ? AND device_id = ?
                WINDOW w AS (PARTITION BY window_index, addr ORDER BY ts_ns, size_bytes)),
            ends AS (SELECT window_index, step, arg_max(total_allocated_bytes, (ts_ns, -size_bytes)) AS end_bytes
                     FROM ev WHERE step IS NOT NULL GROUP BY 1, 2),
            kept AS (SELECT window_index, step, sum(size_bytes) AS bytes, count(*) AS blocks FROM ev
                     WHERE step IS NOT NULL AND size_bytes > 0 AND (next_size IS NULL OR next_size > 0)
                     GROUP BY 1, 2)
            SELECT e.window_index AS window, e.step, e.end_bytes AS allocated_end_bytes,
                   coalesce(k.bytes, 0) AS retained_bytes, coalesce(k.blocks, 0) AS retained_blocks
            FROM ends e LEFT JOIN kept k USING (window_index, step) ORDER BY e.step, e.window_index""",
            [device_type, device_id])
        last_of_window = {}
        for r in rows:
            last_of_window[r["window"]] = max(last_of_window.get(r["window"], r["step"]), r["step"])
        judged = [r for r in rows if r["step"] != last_of_window[r["window"]]]
        retained = sorted(r["retained_bytes"] for r in judged)
        sites = store.dicts(f"""
            WITH ev AS (
                SELECT *, lead(size_bytes) OVER w AS next_size,
                       max(step) OVER (PARTITION BY window_index) AS last_step
                FROM memory_events WHERE device_type = ? AND device_id = ?
                WINDOW w AS (PARTITION BY window_index, addr ORDER BY ts_ns, size_bytes))
            SELECT coalesce(h.name, '(no op)') AS op, sum(e.size_bytes) AS bytes, count(*) AS blocks,
                   count(DISTINCT e.step) AS steps, list(e.host_op_id ORDER BY e.ts_ns)[1:200] AS op_ids
            FROM ev e LEFT JOIN host_ops h ON h.op_id = e.host_op_id
            WHERE e.step IS NOT NULL AND e.step < e.last_step AND e.size_bytes > 0
              AND (e.next_size IS NULL OR e.next_size > 0)
            GROUP BY 1 ORDER BY steps DESC, bytes DESC, op LIMIT {int(site_limit)}""", [device_type, device_id])
        capacity = None
        if device_type != 0:
            capacity = _device_memory_bytes(store, device_id)
        out.append(AllocatorGrowth(
            device_type=device_type, device_id=device_id, steps=rows,
            trend=trend([r["step"] for r in rows], [r["allocated_end_bytes"] or 0 for r in rows]),
            judged_steps=len(judged), retained_median_bytes=int(np.median(retained)) if retained else 0,
            retained_steps=sum(1 for b in retained if b > 0), sites=sites, capacity_bytes=capacity,
            allocated_last_bytes=int(rows[-1]["allocated_end_bytes"] or 0) if rows else 0))
    return out


# ---------------------------------------------------------------- work (step and op times)

def step_time_series(steps, waits: dict | None = None) -> tuple[list[int], list[int]]:
    """(step numbers, step durations less the measured wait for a CPU core, where measured)."""
    waits = waits or {}
    return [s.step for s in steps], [s.dur_ns - waits.get((s.window, s.step), 0) for s in steps]


def step_time_trend(steps, waits: dict | None = None) -> Trend | None:
    """Step duration (less the measured wait for a CPU core, where measured) against step number."""
    return trend(*step_time_series(steps, waits))


def phase_trends(steps, fields: dict[str, str]) -> dict[str, Trend]:
    """Each host phase's time per step (``fields``: phase -> StepBreakdown field) against step number."""
    out = {}
    for phase, name in fields.items():
        t = trend([s.step for s in steps], [getattr(s, name) or 0 for s in steps])
        if t is not None:
            out[phase] = t
    return out


def op_time_trends(store: TableStore, op_filter_sql: str, p_value: float, limit: int = 3) -> list[dict]:
    """Op names whose self time per step rises (Mann-Kendall p below ``p_value``), fastest-growing first:
    {"name", "trend", "steps", "self_ns"} (an op absent from a step counts 0 ns there)."""
    rows = store.rows(f"""
        SELECT name, step, sum(folded_self_ns) FROM host_ops WHERE {op_filter_sql}
        GROUP BY name, step ORDER BY name, step""")
    all_steps = sorted({step for _, step, _ in rows})
    by_name: dict[str, dict[int, int]] = {}
    for name, step, ns in rows:
        by_name.setdefault(name, {})[step] = ns or 0
    found = []
    for name, per_step in by_name.items():
        if len(per_step) < MIN_TREND_POINTS:
            continue
        t = trend(all_steps, [per_step.get(s, 0) for s in all_steps])
        if t is not None and t.slope > 0 and t.p_value < p_value:
            found.append({"name": name, "trend": t, "steps": len(per_step), "self_ns": sum(per_step.values())})
    found.sort(key=lambda r: (-r["trend"].growth, r["name"]))
    return found[:limit]
