"""Helpers shared by the subcommands: options, progress, locating parsed outputs."""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

from mlprof.analysis.inputs import parsed_outputs_of
from mlprof.cli.progress import ProgressBar

__all__ = ["add_common", "progress_for", "print_json", "parsed_outputs", "exit_code_for", "finite_float"]


def exit_code_for(exc: BaseException) -> int:
    """The exit code main() gives this error (one mapping, in main.py)."""
    from mlprof.cli.main import _exit_code

    return _exit_code(exc)


def finite_float(text: str) -> float:
    """argparse type: a real number; nan and inf are refused (exit 2)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
    return value


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
    """(source, output dir) of each input under ``path``, parsing those not parsed yet."""
    return [(o.source, o.output_dir) for o in parsed_outputs_of(path, output=output, progress=progress)]
