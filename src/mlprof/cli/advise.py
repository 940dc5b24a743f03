"""``mlprof advise PATH``: findings with evidence and a fix, printed and written as advisor.json."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from mlprof.cli.common import add_common, add_paths, add_thresholds, parsed_outputs, print_json, progress_for
from mlprof.cli.exit_codes import EXIT_OK

if TYPE_CHECKING:
    from mlprof.analysis.advisor import AdvisorReport

__all__ = ["register", "run"]


def register(sub) -> None:
    p = sub.add_parser("advise", help="find what is slow: findings with evidence and a fix",
                       description="Run the advisor's rules over each capture or trace under PATH (parsing "
                                   "first when needed), print the findings and write advisor.json beside "
                                   "the tables.")
    add_paths(p)
    add_thresholds(p, "data_loading_warn_share=0.2")
    p.add_argument("--no-write", action="store_true", help="do not write advisor.json")
    add_common(p)
    p.set_defaults(run=run)


def _ms(ns: int | float | None) -> str:
    return "-" if ns is None else f"{ns / 1e6:.2f} ms"


def explained_line(e) -> str:
    """One line: the share of step time the warnings explain (counted once) and what is left, by part."""
    rest = sorted(((p["share"] - p["explained_share"], part) for part, p in e.by_part.items()
                   if p["share"] - p["explained_share"] >= 0.01), reverse=True)
    left = ", ".join(f"{part.replace('_', ' ')} {share:.0%}" for share, part in rest[:4])
    why = f"; across the step: {', '.join(e.cross_cutting)}" if e.cross_cutting else ""
    return (f"explained: at least {e.explained_share:.0%} of step time by the warnings (overlaps counted once); "
            f"up to {e.unexplained_share:.0%} not explained" + (f" ({left})" if left else "") + why)


def format_report(source: str, report: AdvisorReport) -> list[str]:
    """Terminal lines for one report (used by the CLI; plain text, no colour)."""
    rank = "" if report.rank is None else f" (rank {report.rank})"
    lines = [f"{source}{rank}: {report.step_count} steps, {_ms(report.total_step_ns)} of step time, "
             f"{len(report.findings)} finding(s), {len(report.warnings)} warning(s)"]
    if report.whole_trace:
        lines.append("  no ProfilerStep spans: each capture window is judged as one step")
    for note in report.notes:
        lines.append(f"  note: {note}")
    if not report.step_count:
        lines.append("  no profiled steps: rules that judge by step time need ProfilerStep spans "
                     "(call prof.step() once per training step)")
    elif not report.findings:
        lines.append("  no findings: nothing above the thresholds")
    if report.step_count and report.explained is not None:
        lines.append("  " + explained_line(report.explained))
    for f in report.findings:
        lines.append(f"  [{f.severity.upper()}] {f.id}: {f.title}")
        if f.impact_ns:
            lines.append(f"    cost: {_ms(f.impact_ns)} ({f.share:.1%} of step time)")
        for site in f.evidence.call_sites[:3]:
            where = " / ".join(x for x in (site.get("module"), site.get("call_site")) if x)
            if where:
                lines.append(f"    at {where}: {_ms(site.get('self_ns'))}")
        for step in f.evidence.steps[:3]:
            value = step.get("value_ns", step.get("self_ns", step.get("pause_ns")))
            extra = f", {_ms(value)} of it" if value is not None else ""
            lines.append(f"    step {step['step']}: {_ms(step.get('dur_ns'))}{extra}" if step.get("dur_ns")
                         else f"    step {step['step']}{extra}")
        lines.append(f"    fix: {f.fix}")
    return lines


def run(args: argparse.Namespace) -> int:
    from mlprof.analysis.advisor import Thresholds
    from mlprof.workflow import advice_entry, advise_outputs

    thresholds = Thresholds.from_overrides(args.threshold)
    outputs = parsed_outputs(args.paths, None, progress_for(args))
    reports = advise_outputs(outputs, thresholds)
    results = []
    for (source, out), report in zip(outputs, reports):
        results.append((source, report, advice_entry(out, report, write=not args.no_write)))
    if args.json:
        print_json([entry for _, _, entry in results])
        return EXIT_OK
    for source, report, _ in results:
        print("\n".join(format_report(source, report)))
        print()
    return EXIT_OK
