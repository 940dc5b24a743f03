"""Rules over monitor mode's whole-job series: periodic stalls, and each triggered window against the
baseline window (:mod:`mlprof.analysis.monitor`)."""

from __future__ import annotations

from mlprof.analysis.advisor.context import AdvisorContext
from mlprof.analysis.advisor.model import Evidence, Finding, Thresholds
from mlprof.analysis.monitor import periodic_stall, window_vs_baseline

__all__ = ["periodic_stalls", "monitor_windows"]

_MS = 1e6


def _short(site: str | None) -> str | None:
    if not site:
        return None
    path, _, rest = site.partition(":")
    return f"{path.rsplit('/', 1)[-1]}:{rest}" if rest else site


def periodic_stalls(ctx: AdvisorContext, th: Thresholds) -> list[Finding]:
    """A stall that comes back every N steps over the whole monitored job, with the line its window saw."""
    found = periodic_stall(ctx.store)
    if found is None:
        return []
    share = found.total_excess_ns / found.job_wall_ns if found.job_wall_ns else 0.0
    site = found.call_sites[0] if found.call_sites else None
    leaf = _short(site.get("leaf")) if site else None
    where = (f" at {_short(site['call_site'])}" + (f" (in {leaf})" if leaf and leaf != _short(site["call_site"])
                                                   else "") if site else "")
    seen = (f"; window {found.window} recorded stalled steps {', '.join(map(str, found.window_stalled_steps[:6]))}"
            if found.window is not None else "; no window recorded a stalled step")
    title = (f"Periodic stall every {found.period_steps} steps from step {found.first_step}: "
             f"+{found.stall_ns / _MS:.1f} ms on a {found.median_ns / _MS:.1f} ms step{where}{seen}")
    severity = "warning" if share >= th.info_share else "info"
    metrics = {"period_steps": found.period_steps, "stalls": found.stalls, "first_step": found.first_step,
               "stall_ns": found.stall_ns, "median_step_ns": found.median_ns,
               "total_excess_ns": found.total_excess_ns, "job_wall_ns": found.job_wall_ns, "share_of_job": share,
               "window": found.window}
    fix = ("Something runs every few steps and blocks the training loop: move it off the step (log or save every "
           "N steps in a background thread, or less often), or make it cheaper" +
           (f"; it is the code at {_short(site['call_site'])}." if site else
            "; record with the stack sampler (mlprof run's default) to see the line."))
    return [Finding(id="periodic_stall", severity=severity, share=share, impact_ns=found.total_excess_ns,
                    title=title,
                    evidence=Evidence(metrics=metrics,
                                      steps=[{"step": s, "window": found.window} for s in found.window_stalled_steps],
                                      call_sites=found.call_sites),
                    fix=fix, rank=ctx.rank)]


def monitor_windows(ctx: AdvisorContext, th: Thresholds) -> list[Finding]:
    """What is different in each window monitor mode opened on a trigger, against its baseline window."""
    compared = window_vs_baseline(ctx.store)
    out = []
    for c in compared:
        ratio = c["median_work_ns"] / c["baseline_median_work_ns"] if c["baseline_median_work_ns"] else None
        grown = c["grown_call_sites"]
        more = (f"; most added time per step at {_short(grown[0]['call_site'])} "
                f"(+{grown[0]['per_step_ns'] / _MS:.1f} ms)" if grown else "")
        title = (f"Monitor window {c['window']} ({c['reason']}: {c['detail']}): median step "
                 f"{c['median_step_ns'] / _MS:.1f} ms vs {c['baseline_median_step_ns'] / _MS:.1f} ms in baseline "
                 f"window {c['baseline_window']}" + (f" ({ratio:.2f}x the work)" if ratio else "") + more)
        out.append(Finding(id="monitor_window", severity="info", share=0.0, impact_ns=0, title=title,
                           evidence=Evidence(metrics={k: v for k, v in c.items() if k != "grown_call_sites"},
                                             call_sites=grown),
                           fix="Open this window's pages (mlprof ui) next to the baseline window's and compare the "
                               "ops and call sites named here.", rank=ctx.rank))
    return out
