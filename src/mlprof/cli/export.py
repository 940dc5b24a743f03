"""``mlprof export PATH``: write export files, optionally for one step."""

from __future__ import annotations

import argparse
from pathlib import Path

from mlprof.cli.common import (add_common, add_export_type, add_paths, export_types, parsed_outputs, print_json,
                               progress_for)
from mlprof.errors import ConfigError
from mlprof.export import SUMMARY_FORMATS, ExportOptions
from mlprof.cli.exit_codes import EXIT_OK

__all__ = ["register", "run"]


def register(sub) -> None:
    p = sub.add_parser("export", help="write trace_view.json, summaries and SQLite (one step with --step)",
                       description="Write the export files of parsed data (parsing first when needed). "
                                   "With --step N only that step's data, into <output>/step_N/.")
    add_paths(p)
    p.add_argument("--step", type=int, default=None, metavar="N", help="only step N, into <output>/step_N/")
    p.add_argument("--summary-format", choices=SUMMARY_FORMATS, default="csv",
                   help="summary files as csv or json (default csv)")
    add_export_type(p)
    p.add_argument("--output", type=Path, default=None, metavar="DIR", help="directory for the files (one input only)")
    add_common(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from mlprof.export import run_exports

    outputs = parsed_outputs(args.paths, None, progress_for(args))
    if args.output is not None and len(outputs) > 1:
        raise ConfigError(f"{args.paths[0]}: --output needs a single input, found {len(outputs)}")
    report = []
    for source, out in outputs:
        target = args.output or (out / f"step_{args.step}" if args.step is not None else out)
        options = ExportOptions(step=args.step, summary_format=args.summary_format,
                                export_types=export_types(args), target_dir=target)
        files = run_exports(out, options)
        report.append({"source": source, "output_dir": str(target), "files": [str(p) for p in files]})
    if args.json:
        print_json(report)
    else:
        for entry in report:
            print(f"{entry['source']}: {len(entry['files'])} files -> {entry['output_dir']}")
    return EXIT_OK
