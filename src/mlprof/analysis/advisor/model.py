"""The advisor's types: findings with evidence, and the thresholds rules judge by.

Every threshold is a share of step time (the sum of the profiled steps'
durations) or a count/duration named with its unit, so one set of defaults
fits a 2 ms CPU step and a 2 s GPU step alike.
"""

from __future__ import annotations

import math

from dataclasses import asdict, dataclass, field, fields

from mlprof.errors import ConfigError

__all__ = ["Evidence", "Finding", "Thresholds", "SEVERITIES", "severity_for"]

# Most severe first; the order findings are reported in.
SEVERITIES = ("critical", "warning", "info")


@dataclass(frozen=True)
class Thresholds:
    """When a rule reports, and how loudly. Shares are fractions of total step time."""

    # Below this share a rule reports nothing (noise on a busy machine).
    info_share: float = 0.03
    # At or above this share any finding is critical: it holds a third of the run.
    critical_share: float = 0.30
    # One op type (by self time) holding this share of step time.
    dominant_op_warn_share: float = 0.25
    # Host time waiting for the next batch (DataLoader iteration) in the step.
    data_loading_warn_share: float = 0.10
    # ... when the DataLoader already uses worker processes (each wait includes the batch's hand-off).
    data_loading_workers_warn_share: float = 0.20
    # Step time covered by no op at all: the user's Python, sleeps, I/O, logging.
    # High by nature on tiny CPU steps (loop glue), hence a high bar.
    host_outside_ops_warn_share: float = 0.40
    # One function of the user's doing work besides the step's own (Python and the ops it runs).
    side_work_warn_share: float = 0.20
    # Python garbage-collector pauses inside steps.
    gc_warn_share: float = 0.05
    # Host blocked in synchronisations (.item(), cuda*Synchronize) inside steps.
    sync_warn_share: float = 0.05
    # Device idle in steps (free + preparing time of the step breakdown).
    device_idle_warn_share: float = 0.15
    # A kernel shorter than this is "tiny": launch cost is comparable to its run time.
    small_kernel_dur_ns: int = 10_000
    # Communication time not hidden behind computation.
    communication_warn_share: float = 0.10
    # Host time in device allocator calls (cudaMalloc/cudaFree, ...) inside steps.
    memory_api_warn_share: float = 0.03
    # Allocations per step above which allocator churn is worth a look (count).
    allocations_per_step: int = 5_000
    # A step longer than this many times the median step is an outlier ...
    step_outlier_ratio: float = 2.0
    # ... and outliers warn when their excess over the median holds this share.
    step_outlier_warn_share: float = 0.15
    # ... and at least this many outliers: one slow step alone is usually noise
    # (preemption, warm-up), while recurring ones (checkpoints, eval) are actionable.
    step_outlier_min_count: int = 2
    # Compilation (dynamo/inductor) time inside steps, and recompiles seen (count).
    compile_warn_share: float = 0.05
    # A rank whose mean step exceeds the ranks' median by this share is slow.
    slow_rank_warn_share: float = 0.10
    # Host-bound op storm: an op name called at least this many times per step ...
    op_storm_calls_per_step: int = 64
    # ... at under this many ns a call (tiny: dispatch costs as much as the work) ...
    tiny_op_ns: int = 50_000
    # ... with Python gaps shorter than this between consecutive calls counted as the loop's ...
    op_storm_gap_ns: int = 200_000
    # ... warns at this share of step time. When this share of the storm ops' time is inside other
    # framework ops (a layer's views and transposes, DDP's per-parameter copies), the repetition is
    # the model's own, not a Python loop (measured 2026-11-26: the diagnosis benchmark's Python loops 0-51%,
    # per-sample loops around 512-2048-wide MLPs 54-72%; a DDP transformer on an H200 91-92%).
    op_storm_warn_share: float = 0.20
    op_storm_inside_ops_share: float = 0.80
    # CPU contention: other processes using at least this share of the machine's cores during the
    # steps (while threads queue for a core) warn; it is also the estimated share of step time lost.
    cpu_contention_other_share: float = 0.25
    # Threads per core above which CPU threads are oversubscribed.
    threads_per_core: float = 1.0
    # Step time computing in float64/complex128 (modules or op inputs).
    slow_dtype_warn_share: float = 0.10
    # Step time creating and filling fresh tensors (torch.zeros/ones/full) on the host.
    fresh_tensor_warn_share: float = 0.10
    # Step time in ops on an Ascend NPU's AI CPU (slow cores) worth a warning.
    ai_cpu_warn_share: float = 0.05
    # Step time a debug mode left on costs (anomaly detection's tracebacks and NaN checks, blocking launches).
    debug_mode_warn_share: float = 0.05
    # Growth across steps (analysis/growth.py): a rise is a trend when its one-sided Mann-Kendall p-value is
    # below this (5 steps must all rise) ...
    growth_p_value: float = 0.01
    # ... memory growing at least this many bytes over the steps judged is reported ...
    memory_growth_min_bytes: int = 16 * 2**20
    # ... and is critical when it would use up the memory left within this many steps.
    memory_growth_critical_steps: int = 10_000
    # Step time whose fitted line rises by this share of its first step's over the profiled steps.
    work_growth_warn_share: float = 0.20

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if (not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value)
                    or value < 0):
                raise ConfigError(f"advisor threshold {f.name}={value!r}: must be a finite number >= 0")
        if not self.info_share <= self.critical_share:
            raise ConfigError("advisor thresholds: info_share must not exceed critical_share")

    @classmethod
    def from_overrides(cls, pairs: list[str]) -> Thresholds:
        """Thresholds from ``NAME=VALUE`` strings (the CLI's ``--threshold``)."""
        known = {f.name: f.type for f in fields(cls)}
        values: dict[str, float | int] = {}
        for pair in pairs:
            name, sep, raw = pair.partition("=")
            name = name.strip().replace("-", "_")
            if not sep or name not in known:
                raise ConfigError(f"--threshold {pair!r}: expected NAME=VALUE with NAME one of "
                                  f"{', '.join(sorted(known))}")
            try:
                values[name] = int(raw) if known[name] in ("int", int) else float(raw)
            except ValueError:
                raise ConfigError(f"--threshold {pair!r}: {raw!r} is not a number") from None
        return cls(**values)


def severity_for(share: float, warn_share: float, th: Thresholds) -> str | None:
    """Severity of a finding whose cost is ``share`` of step time; None = do not report."""
    if share >= th.critical_share and share >= warn_share:
        return "critical"
    if share >= warn_share:
        return "warning"
    if share >= th.info_share:
        return "info"
    return None


@dataclass
class Evidence:
    """The numbers behind a finding, and what they involve."""

    # Named measurements with units in the names (total_ns, share, count, ...).
    metrics: dict[str, float | int | str | None] = field(default_factory=dict)
    # Steps involved (worst first), each {"step", "window", ...numbers}.
    steps: list[dict] = field(default_factory=list)
    # Ops, kernels or API calls involved, each {"name", ...numbers}.
    ops: list[dict] = field(default_factory=list)
    # Python call sites / modules the time comes from, each {"call_site", ...numbers}.
    call_sites: list[dict] = field(default_factory=list)


@dataclass
class Finding:
    """One problem the advisor found: what, how bad, the proof, and what to do."""

    id: str  # stable rule id, e.g. "dominant_op"
    title: str  # one line, with the key number
    severity: str  # critical, warning or info
    share: float  # cost as a fraction of total step time (0 when not measurable as time)
    impact_ns: int  # the time at stake over the profiled steps
    evidence: Evidence
    fix: str  # a concrete change to try
    rank: int | None = None

    def to_dict(self) -> dict:
        return asdict(self)
