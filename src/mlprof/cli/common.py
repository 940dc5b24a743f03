"""Helpers shared by the subcommands: options, progress, locating parsed outputs."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from mlprof.settings._argparse import ListOption, finite_float
from mlprof.outputs import parsed_outputs as parsed_outputs_of
from mlprof.cli.exit_codes import exit_code_for
from mlprof.cli.progress import ProgressBar
from mlprof.errors import ConfigError

__all__ = ["add_common", "add_paths", "add_thresholds", "progress_for", "print_json", "parsed_outputs", "exit_code_for",
           "finite_float", "ListOption"]


def add_paths(p: argparse.ArgumentParser, what: str = "captures or traces") -> None:
    """The PATH... positional of the commands that read parsed outputs (several paths accepted)."""
    p.add_argument("paths", type=Path, nargs="+", metavar="PATH",
                   help=f"{what}: a capture dir, a dir of captures, a trace file, or a parsed output dir "
                        "(several may be given)")


def add_thresholds(p: argparse.ArgumentParser, example: str) -> None:
    """``--threshold NAME=VALUE``, a list option like the others (comma list or repeated)."""
    p.add_argument("--threshold", action=ListOption, default=[], metavar="NAME=VALUE",
                   help=f"override a threshold, e.g. {example}; several as a comma list or repeat the option")


def add_export_type(p: argparse.ArgumentParser) -> None:
    """``--export-type``, the same for every command that writes exports (default: the capture's, else text)."""
    from mlprof.export.options import EXPORT_TYPES

    p.add_argument("--export-type", choices=EXPORT_TYPES, action=ListOption, default=None,
                   help="text (default) and/or db (SQLite): --export-type text,db or repeat the option")


def export_types(args: argparse.Namespace) -> tuple[str, ...]:
    """The export types ``--export-type`` asked for, else the default."""
    from mlprof.export.options import DEFAULT_EXPORT_TYPES

    return tuple(args.export_type or DEFAULT_EXPORT_TYPES)


def add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print the result as JSON on stdout")
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="show a progress bar on stderr (default: when stderr is a terminal)")


def progress_for(args: argparse.Namespace):
    show = args.progress if args.progress is not None else sys.stderr.isatty()
    return ProgressBar() if show else None


def print_json(data) -> None:
    json.dump(data, sys.stdout, indent=2, default=str)
    sys.stdout.write("\n")


def parsed_outputs(paths: Path | list[Path], output: Path | None, progress) -> list[tuple[str, Path]]:
    """(source, output dir) of each input under ``paths``, parsing those not parsed yet."""
    paths = [paths] if isinstance(paths, (str, Path)) else list(paths)
    if output is not None and len(paths) > 1:
        raise ConfigError(f"--output needs a single input, got {len(paths)} paths")
    return [(o.source, o.output_dir) for path in paths
            for o in parsed_outputs_of(path, output=output, progress=progress)]
