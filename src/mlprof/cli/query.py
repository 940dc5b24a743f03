"""``mlprof query PATH``: job information of parsed captures or traces."""

from __future__ import annotations

import argparse
from datetime import datetime, timezone
from pathlib import Path

from mlprof.cli.common import add_common, add_paths, parsed_outputs, print_json, progress_for
from mlprof.tables.store import TableStore
from mlprof.tables.layout import TABLES_DIR
from mlprof.cli.exit_codes import EXIT_OK

__all__ = ["register", "run"]


def register(sub) -> None:
    p = sub.add_parser("query", help="job, rank/devices, collection time, steps, slowest steps, data size",
                       description="Show the job information table of each capture or trace under PATH "
                                   "(parsing first when needed).")
    add_paths(p)
    add_common(p)
    p.set_defaults(run=run)


def _when(ns: int | None) -> str:
    if ns is None:
        return "-"
    return datetime.fromtimestamp(ns / 1e9, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + " UTC"


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def _monitor_rows(monitor: dict) -> list[tuple[str, str]]:
    """Monitor mode's lines: the steps it timed and each window it opened (or had no room for)."""
    per = monitor["steps_per_record_max"]
    kept = "every step" if per == 1 else f"up to {per} steps a row past the series' cap"
    rows = [("monitored steps", f"{monitor['steps']:,} ({monitor['records']:,} rows, {kept})")]
    for w in monitor["windows"]:
        span = f"steps {w['first_step']}-{w['last_step']}" if w["last_step"] is not None else f"from step {w['first_step']}"
        rows.append((f"window {w['window']}", f"{w['reason']} after step {w['trigger_step']}, {span}: {w['detail']}"))
    for w in monitor["skipped"]:
        rows.append(("not opened", f"{w['reason']} after step {w['trigger_step']} ({w['skipped']}): {w['detail']}"))
    return rows


def run(args: argparse.Namespace) -> int:
    from mlprof.analysis.job_info import job_info

    infos = []
    for source, out in parsed_outputs(args.paths, None, progress_for(args)):
        with TableStore(out / TABLES_DIR) as store:
            infos.append(job_info(store, Path(source), out))
    if args.json:
        print_json([i.to_dict() for i in infos])
        return EXIT_OK
    for info in infos:
        duration = (info.end_ns - info.start_ns) / 1e9 if info.start_ns is not None else 0.0
        slow = ", ".join(f"#{s['step']} {s['dur_ns'] / 1e6:.3f} ms" for s in info.slowest_steps) or "-"
        rows = [
            ("job", info.job), ("source", info.source),
            ("rank", "-" if info.rank is None else str(info.rank)),
            ("devices", ", ".join(map(str, info.devices)) or "CPU only"),
            ("collected", f"{_when(info.start_ns)} .. {_when(info.end_ns)} ({duration:.3f} s)"),
            ("steps", str(info.step_count)), ("slowest steps", slow),
            ("events", f"{info.event_count:,}"),
            ("raw data", _size(info.raw_bytes)), ("parsed output", _size(info.output_bytes)),
        ]
        if info.monitor is not None:
            rows += _monitor_rows(info.monitor)
        width = max(len(k) for k, _ in rows)
        for key, value in rows:
            print(f"{key:<{width}}  {value}")
        print()
    return EXIT_OK
