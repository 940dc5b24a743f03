"""``mlprof`` command line: argparse wiring and error-to-exit-code mapping only.

Every failure mlprof raises on purpose becomes one line on stderr naming the
file and the problem, and an exit code; never a traceback (set MLPROF_DEBUG=1
to see one).
"""

from __future__ import annotations

import argparse
import difflib
import os
import sys

from mlprof._version import __version__
from mlprof.cli.exit_codes import (EXIT_CODES, EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_OK, EXIT_PARTIAL,
                                   exit_code_for)
from mlprof.errors import MlprofError

__all__ = ["main", "build_parser", "EXIT_CODES", "EXIT_PARTIAL"]


def build_parser() -> argparse.ArgumentParser:
    from mlprof.cli import advise, callsites, cluster, compare, export, modules, op, parse, query, run, ui

    parser = argparse.ArgumentParser(prog="mlprof", description="mlprof: profile PyTorch training.")
    parser.add_argument("--version", action="version", version=f"mlprof {__version__}",
                        help="print mlprof's version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", help="run `mlprof COMMAND --help` for its options")
    sub.required = True
    for module in (parse, export, query, ui, run, advise, op, modules, callsites, compare, cluster):
        module.register(sub)
    return parser


def _refuse_unknown(parser: argparse.ArgumentParser, args: argparse.Namespace, extra: list[str]) -> None:
    """An unknown option: the subcommand's own usage, and the closest option it has (exit 2)."""
    command = getattr(args, "command", None)
    subparsers = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
    target = subparsers.choices.get(command, parser) if subparsers is not None else parser
    known = [s for a in target._actions for s in a.option_strings]
    words = []
    for item in extra:
        word = item.split("=", 1)[0]
        close = difflib.get_close_matches(word, known, n=1, cutoff=0.6) if word.startswith("-") else []
        words.append(f"{item} (did you mean {close[0]}?)" if close else item)
    target.error("unrecognized arguments: " + " ".join(words))


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:
        _refuse_unknown(parser, args, extra)
    try:
        return args.run(args)
    except MlprofError as exc:
        if os.environ.get("MLPROF_DEBUG"):
            raise
        print(f"mlprof {args.command}: error: {exc}", file=sys.stderr)
        return exit_code_for(exc)
    except BrokenPipeError:  # output piped into `head` and the like
        sys.stderr.close()
        return EXIT_OK
    except KeyboardInterrupt:
        print(f"mlprof {args.command}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:  # a bug: still one line, but say it is one
        if os.environ.get("MLPROF_DEBUG"):
            raise
        print(f"mlprof {args.command}: internal error: {type(exc).__name__}: {exc} "
              "(set MLPROF_DEBUG=1 for a traceback)", file=sys.stderr)
        return EXIT_INTERNAL


def run() -> None:
    sys.exit(main())


if __name__ == "__main__":
    run()
