"""``mlprof cluster DIR [DIR ...]``: every rank under the DIRs: step breakdown, slow ranks, communication."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from mlprof.cli.common import add_common, add_thresholds, print_json
from mlprof.cli.exit_codes import EXIT_PARTIAL
from mlprof.errors import printable

if TYPE_CHECKING:
    from mlprof.analysis.cluster import ClusterReport

__all__ = ["register", "run"]


def register(sub) -> None:
    p = sub.add_parser("cluster", help="all ranks at once: per-rank breakdown, slow ranks, communication",
                       description="Parse every rank's capture or trace under DIR in parallel processes (or on "
                                   "a Dask cluster with --scheduler) and show per-rank step time split into "
                                   "compute, communication (wait/transit) and free time, slow ranks, "
                                   "communication per collective and rank, and the communication matrix.")
    p.add_argument("paths", type=Path, nargs="+", metavar="DIR",
                   help="directory holding the ranks' captures or traces (several may be given, e.g. one per node)")
    p.add_argument("--workers", type=int, default=None, metavar="N", help="parallel processes (default: one per CPU)")
    p.add_argument("--scheduler", default=None, metavar="ADDRESS",
                   help="Dask scheduler address (tcp://host:8786): parse ranks on that cluster "
                        "(needs pip install 'mlprof[cluster]')")
    add_thresholds(p, "slow_rank_warn_share=0.05")
    add_common(p)
    p.set_defaults(run=run)


def _ms(ns: float | None) -> str:
    return "-" if ns is None else f"{ns / 1e6:,.3f}"


def format_cluster(report: ClusterReport) -> list[str]:
    head = (f"{len(report.ranks)} capture(s) in {len(report.jobs)} separate jobs or runs (ranks compared "
            "within a job only)" if len(report.jobs) > 1 else f"{len(report.ranks)} rank(s)")
    lines = [head, "",
             "Per rank, mean per step (ms)",
             f"  {'rank':>5} {'steps':>5} {'step':>10} {'compute':>10} {'comm':>10} {'wait':>10} "
             f"{'transit':>10} {'free':>10} {'data load':>10}"]
    for r in report.ranks:
        lines.append(f"  {'-' if r.rank is None else r.rank:>5} {r.steps:>5} {_ms(r.step_ns):>10} "
                     f"{_ms(r.compute_ns):>10} {_ms(r.communication_ns):>10} {_ms(r.wait_ns):>10} "
                     f"{_ms(r.transit_ns):>10} {_ms(r.free_ns):>10} {_ms(r.data_loading_ns):>10}")
    lines.append("")
    if report.slow_ranks:
        lines.append("Slow ranks")
        for s in report.slow_ranks:
            lines.append(f"  [{s.severity.upper()}] rank {s.rank}: {s.excess_in} {_ms(s.value_ns)} ms per step vs "
                         f"{_ms(s.median_ns)} ms on the others (+{s.share_of_step:.0%} of a step)")
            lines += _cause_lines(s)
    else:
        lines.append("No slow rank.")
    lines.append("")
    if report.collectives:
        lines += ["Communication per collective and rank",
                  f"  {'rank':>5} {'count':>6} {'total ms':>10} {'wait ms':>10} {'transit ms':>10} "
                  f"{'MB':>10} {'GB/s':>8}  collective"]
        for c in report.collectives:
            mb = "-" if c.size_bytes is None else f"{c.size_bytes / 1e6:,.2f}"
            bw = "-" if c.bandwidth_gb_per_s is None else f"{c.bandwidth_gb_per_s:.3f}"
            lines.append(f"  {'-' if c.rank is None else c.rank:>5} {c.count:>6} {_ms(c.total_ns):>10} "
                         f"{_ms(c.wait_ns):>10} {_ms(c.transit_ns):>10} {mb:>10} {bw:>8}  "
                         f"{c.collective}{' [' + c.group + ']' if c.group else ''}")
        lines.append("")
    lines += _arrival_lines(report)
    if report.matrix:
        lines.append("Communication matrix (src -> dst)")
        for m in report.matrix[:50]:
            size = "-" if m["size_bytes"] is None else f"{m['size_bytes'] / 1e6:,.2f} MB"
            lines.append(f"  {m['src_rank']} -> {m['dst_rank']}: {m['collective']} x{m['count']}, {size}, "
                         f"{_ms(m['time_ns'])} ms")
        lines.append("")
    for f in report.failed:
        lines.append(f"skipped {f['source']}: {f['error']}")
    for w in report.warnings:
        lines.append(f"note: {w}")
    return lines


def _cause_lines(s) -> list[str]:
    """The slow rank's cause (mlprof.analysis.rank_cause), then the other components of its excess."""
    if s.cause is None:
        lines = ["      cause: unknown (the ranks carry no attribution)"]
        rest = []
    else:
        share = "" if s.cause_share_of_wait is None else f", {s.cause_share_of_wait:.0%} of the others' wait"
        where = "".join(f", {k} {v}" for k, v in (("at", s.call_site), ("in module", s.module)) if v)
        lines = [f"      cause: {s.cause_label} +{_ms(s.cause_ns)} ms per step{share}{where}"]
        rest = [c for c in s.components if c["cause"] != s.cause][:3]
    if rest:
        lines.append("      also: " + "; ".join(f"{c['label']} +{_ms(c['excess_ns'])} ms" for c in rest))
    if s.also_in:
        lines.append("      also slower in: " + "; ".join(f"{a['excess_in']} +{_ms(a['excess_ns'])} ms per step"
                                                        for a in s.also_in))
    return lines


def _arrival_lines(report: ClusterReport) -> list[str]:
    """Per collective: the rank that arrives last most often (arrival order over matched instances)."""
    by_coll: dict[tuple, list[dict]] = {}
    for a in report.arrivals:
        by_coll.setdefault((a["collective"], a["group"]), []).append(a)
    if not by_coll:
        return []
    lines = ["Arrival order per collective (last to arrive: the others wait for it)"]
    for (name, grp), rows in sorted(by_coll.items()):
        top = sorted(rows, key=lambda a: (-a["last_count"], -a["mean_late_ns"]))[:3]
        lines.append(f"  {name}{' [' + grp + ']' if grp else ''}: " + ", ".join(
            f"rank {a['rank']} last in {a['last_count']}/{a['instances']} (mean {_ms(a['mean_late_ns'])} ms "
            "behind the first)" for a in top))
    return [*lines, ""]


def run(args: argparse.Namespace) -> int:
    from mlprof.analysis.advisor import Thresholds
    from mlprof.workflow import cluster

    report = cluster(args.paths, workers=args.workers, scheduler=args.scheduler,
                     thresholds=Thresholds.from_overrides(args.threshold))
    if args.json:
        print_json(report.to_dict())
    else:
        print("\n".join(format_cluster(report)))
    for f in report.failed:
        print(f"mlprof cluster: error: {printable(f['error'])}", file=sys.stderr)
    return EXIT_PARTIAL if report.failed else 0
