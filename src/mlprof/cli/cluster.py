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
            lines.append(f"  [{s.severity.upper()}] rank {s.rank}: {s.cause} {_ms(s.value_ns)} ms per step vs "
                         f"{_ms(s.median_ns)} ms on the others (+{s.share_of_step:.0%} of a step)")
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
