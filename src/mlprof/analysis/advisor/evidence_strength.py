"""How much evidence a report rests on: few steps, few stack samples, a call site named from a handful.

A share measured over 3 steps, or a line of code named from 3 stack samples,
reads as confidently as one measured over 200: the report says which is which.
Rules name call sites from the Python sampler (``samples`` on each call site of
their evidence); a site resting on fewer than ``CALL_SITE_MIN_SAMPLES`` samples
is marked ``uncertain`` and its finding says so in its title.
"""

from __future__ import annotations

from mlprof.analysis.advisor.context import AdvisorContext
from mlprof.analysis.advisor.model import Finding
from mlprof.settings.schedule import MIN_STEPS, RECOMMENDED_STEPS

__all__ = ["mark_thin_call_sites", "window_notes", "CALL_SITE_MIN_SAMPLES", "WINDOW_MIN_SAMPLES"]

# A call site named from fewer samples than this may be the wrong line: with 3 of 5 samples on a line,
# its share's 95% interval runs from about 15% to 95%.
CALL_SITE_MIN_SAMPLES = 10
# Stack samples over the recorded steps below which every sampled share is coarse.
WINDOW_MIN_SAMPLES = 100


def mark_thin_call_sites(findings: list[Finding]) -> None:
    """Mark each call site resting on few samples, and say so in its finding's title (in place)."""
    for finding in findings:
        sites = finding.evidence.call_sites
        counts = [site.get("samples") for site in sites if isinstance(site.get("samples"), int)]
        if not counts:
            continue
        for site in sites:
            samples = site.get("samples")
            if isinstance(samples, int) and samples < CALL_SITE_MIN_SAMPLES:
                site["uncertain"] = True
        top = sites[0].get("samples")
        if isinstance(top, int) and top < CALL_SITE_MIN_SAMPLES:
            note = f"{top} sample{'s' if top != 1 else ''}: call site uncertain"
            finding.evidence.metrics["call_site_note"] = note
            if note not in finding.title:
                finding.title = f"{finding.title} ({note})"


def window_notes(ctx: AdvisorContext) -> list[str]:
    """Sentences for the report when its steps or stack samples are too few to lean on."""
    notes = []
    steps = len(ctx.steps)
    if 0 < steps < RECOMMENDED_STEPS:
        notes.append(f"only {steps} step(s) recorded: shares rest on few steps"
                     + (", and `mlprof compare` cannot give a verdict on fewer than "
                        f"{MIN_STEPS}" if steps < MIN_STEPS else "")
                     + f"; record {RECOMMENDED_STEPS} or more (the default window of `mlprof run`, --active auto)")
    sampled = _samples_in_steps(ctx)
    if sampled is not None and sampled < WINDOW_MIN_SAMPLES:
        notes.append(f"the Python stack sampler took {sampled} sample(s) in the recorded steps (under "
                     f"{WINDOW_MIN_SAMPLES}): call sites named from them are uncertain; record a longer window")
    return notes


def _samples_in_steps(ctx: AdvisorContext) -> int | None:
    """Stack samples taken inside the steps; None when the capture did not sample Python at all."""
    if not ctx.store.rows("SELECT count(*) FROM python_samples")[0][0]:
        config = ctx.metadata.get("capture.config") or {}
        sampling = isinstance(config, dict) and (config.get("experimental_config") or {}).get("python_sampling")
        return 0 if sampling else None
    return ctx.store.rows("SELECT count(*) FROM python_samples WHERE step IS NOT NULL")[0][0]
