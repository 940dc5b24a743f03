"""``mlprof parse PATH``: parse captures or trace files into tables, then export."""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

from mlprof.cli.common import add_common, add_export_type, exit_code_for, export_types, print_json, progress_for
from mlprof.cli.exit_codes import EXIT_OK, EXIT_PARTIAL
from mlprof.batch import InternalError
from mlprof.errors import ConfigError, printable
from mlprof.export import (PARSE_TRACE_VIEW_MAX_EVENTS, SUMMARY_FORMATS, TRACE_VIEW_FILE,
                           ExportOptions)
from mlprof.settings.options import ExportType, parse_size

__all__ = ["register", "run", "summary_line"]

def register(sub) -> None:
    p = sub.add_parser("parse", help="parse a capture dir, a dir of captures, or a trace file",
                       description="Parse every complete capture window (or trace file) under each PATH into "
                                   "tables, then write the export files.")
    p.add_argument("paths", type=Path, nargs="+", metavar="PATH",
                   help="a capture dir, a dir of captures or traces, a trace file (.json, .json.gz) or an "
                        "Ascend *_ascend_pt folder (several may be given)")
    p.add_argument("--output", type=Path, default=None, metavar="DIR",
                   help="output directory (one input only; default: beside the input)")
    p.add_argument("--jobs", type=int, default=1, metavar="N",
                   help="parse N captures/traces at once, each in its own process (default 1)")
    p.add_argument("--tables-only", action="store_true", help="write the tables, skip the export files")
    p.add_argument("--trace-view", action="store_true",
                   help=f"write {TRACE_VIEW_FILE} even for a trace of over {PARSE_TRACE_VIEW_MAX_EVENTS:,} events "
                        "(by default `mlprof export` writes it for those, when asked)")
    p.add_argument("--memory-budget", type=_size, default=None, metavar="SIZE",
                   help="memory one parse aims to stay under, e.g. 512M, 2G (default: $MLPROF_MEMORY_BUDGET, else 1G; see docs/cli.md)")
    p.add_argument("--summary-format", choices=SUMMARY_FORMATS, default="csv",
                   help="summary files as csv or json (default csv)")
    add_export_type(p)
    p.add_argument("--verbose", "-v", action="store_true",
                   help="also list the trace events mlprof counted but does not model")
    add_common(p)
    p.set_defaults(run=run)


def _size(text: str) -> int:
    """'512M', '2G', '1.5G' or bytes -> bytes (argparse type)."""
    size = parse_size(text)
    if size is None:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (e.g. 512M, 2G)")
    return size


def run(args: argparse.Namespace) -> int:
    from mlprof.export import run_exports
    from mlprof.parse import ParseOptions, parse_path

    export_options = None
    if not args.tables_only:
        export_options = ExportOptions(summary_format=args.summary_format,
                                       export_types=export_types(args),
                                       trace_view_max_events=None if args.trace_view else PARSE_TRACE_VIEW_MAX_EVENTS)
    # Several inputs: each one that fails is reported, the others still parsed.
    if args.output is not None and len(args.paths) > 1:
        raise ConfigError(f"--output needs a single input, got {len(args.paths)} paths")
    bar = progress_for(args)
    options = ParseOptions(output_dir=args.output, progress=bar, on_stage=bar.stage if bar else None,
                           on_error="continue", jobs=args.jobs,
                           memory_budget_bytes=args.memory_budget)
    results = [result for path in args.paths for result in parse_path(path, options)]
    failures = [r for r in results if r.error is not None]
    if len(failures) == len(results):
        if isinstance(failures[0].exception, InternalError):
            raise RuntimeError(failures[0].error)
        if len(results) == 1:
            raise failures[0].exception
    report = []
    for result in results:
        entry = result.to_dict()
        entry["exports"] = []
        if result.error is not None:
            print(f"mlprof parse: error: {printable(result.error)}", file=sys.stderr)
        elif export_options is not None:
            options = export_options
            if args.export_type is None and result.requested_export_types:
                # The capture's own config (export_type=[..., Db]) adds its types (SQLite) to the default.
                options = replace(options, export_types=tuple(dict.fromkeys(
                    options.export_types + tuple(result.requested_export_types))))
            entry["exports"] = [p.name for p in run_exports(Path(result.output_dir), options)]
            if ExportType.Text.value in options.export_types and TRACE_VIEW_FILE not in entry["exports"]:
                entry["deferred"] = [TRACE_VIEW_FILE]
        report.append(entry)
    # Some inputs failed: "partial" (6); all failed: the first failure's own code.
    if not failures:
        status = EXIT_OK
    elif len(failures) < len(results):
        status = EXIT_PARTIAL
    else:
        status = exit_code_for(failures[0].exception)
    if args.json:
        print_json(report)
        return status
    for entry in report:
        if entry["error"] is not None:
            continue
        print(summary_line(entry))
        if entry.get("deferred"):
            print(f"  {TRACE_VIEW_FILE} not written (over {PARSE_TRACE_VIEW_MAX_EVENTS:,} events): "
                  f"`mlprof export {entry['output_dir']}` writes it")
        for skipped in entry["skipped"]:
            print(f"  skipped {skipped}")
        if args.verbose and entry["unknown_events"]:
            kinds = ", ".join(f"{k} x{v}" for k, v in sorted(entry["unknown_events"].items()))
            print(f"  not modelled (counted): {kinds}")
    return status


def _count(n: int, word: str) -> str:
    return f"{n:,} {word}" + ("" if n == 1 else "s")


def summary_line(entry: dict) -> str:
    """One line per parsed input, in the user's words: what was read, how many steps, where it went."""
    parts = [_count(entry["event_count"], "event")]
    if entry["kind"] == "capture":
        # Capture windows are the schedule's recorded stretches; a trace file has none to speak of.
        parts.append(_count(len(entry["windows"]), "capture window"))
    steps = entry["table_rows"].get("steps", 0)
    parts.append(_count(steps, "step"))
    return f"{entry['source']}: {', '.join(parts)}, parsed in {entry['parse_seconds']} s -> {entry['output_dir']}"
