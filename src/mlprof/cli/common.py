"""Helpers shared by the subcommands: options, progress, locating parsed outputs."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from mlprof.cli.progress import ProgressBar
from mlprof.parse import ParseOptions, ParseResult, parse_path
from mlprof.parse.capture_reader import find_inputs
from mlprof.parse.pipeline import PARSE_INFO_FILE, TABLES_DIR

__all__ = ["add_common", "progress_for", "print_json", "parsed_outputs", "exit_code_for"]


def exit_code_for(exc: BaseException) -> int:
    """The exit code main() gives this error (one mapping, in main.py)."""
    from mlprof.cli.main import _exit_code

    return _exit_code(exc)


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


def parsed_outputs(path: Path, output: Path | None, progress) -> list[tuple[str, Path]]:
    """(source, output dir) of each input under ``path``, parsing those not parsed yet.

    ``path`` may also be an output directory itself (one holding ``tables/``).
    """
    path = Path(path)
    if (path / TABLES_DIR).is_dir() and not (path / "raw").is_dir():
        info_file = path / PARSE_INFO_FILE
        source = str(path)
        if info_file.is_file():
            try:
                source = json.loads(info_file.read_text()).get("source", source)
            except ValueError:
                pass
        return [(source, path)]
    found = []
    for item in find_inputs(path):
        out = Path(output) if output else item.output_dir
        if not (out / TABLES_DIR).is_dir():
            result: ParseResult = parse_path(getattr(item, "root", None) or item.path,
                                             ParseOptions(output_dir=out, progress=progress))[0]
            out = Path(result.output_dir)
        found.append((str(getattr(item, "root", None) or item.path), out))
    return found
