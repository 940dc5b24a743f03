"""``mlprof`` command line: argparse wiring and error-to-exit-code mapping only.

Every failure mlprof raises on purpose becomes one line on stderr naming the
file and the problem, and an exit code; never a traceback (set MLPROF_DEBUG=1
to see one).
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import sys

from mlprof._version import __version__
from mlprof.cli.exit_codes import (EXIT_CODES, EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_OK, EXIT_PARTIAL,
                                   exit_code_for)
from mlprof.errors import MlprofError, printable

__all__ = ["main", "build_parser", "EXIT_CODES", "EXIT_PARTIAL"]


class _Parser(argparse.ArgumentParser):
    """argparse that says "did you mean": for a mistyped option (also when it leaves a required one
    missing, which argparse reports first) and for a mistyped choice (a command, a format)."""

    _argv: list[str] = []

    def parse_known_args(self, args=None, namespace=None):
        self._argv = list(sys.argv[1:] if args is None else args)  # a subcommand sees its own words
        return super().parse_known_args(args, namespace)

    def _with_guesses(self, words: list[str], cutoff: float = 0.6) -> list[str]:
        known = [s for a in self._actions for s in a.option_strings]
        out = []
        for item in words:
            word = item.split("=", 1)[0]
            close = difflib.get_close_matches(word, known, n=1, cutoff=cutoff) if word.startswith("-") else []
            out.append(f"{item} (did you mean {close[0]}?)" if close else item)
        return out

    def refuse_unknown(self, extra: list[str]) -> None:
        """An unknown option: this (sub)command's own usage, and the closest option it has (exit 2)."""
        self.error("unrecognized arguments: " + " ".join(self._with_guesses(extra)))

    def error(self, message: str):
        if message.startswith("the following arguments are required"):
            words = self._argv[:self._argv.index("--")] if "--" in self._argv else self._argv
            known = {s for a in self._actions for s in a.option_strings}
            unknown = [w for w in words if w.startswith("--") and w.split("=", 1)[0] not in known]
            guessed = [w for w in self._with_guesses(unknown, cutoff=0.75) if "did you mean" in w]
            if guessed:  # a clear typo is why the option looks missing
                message = "unrecognized arguments: " + " ".join(guessed)
        choice = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)$", message)
        if choice:
            close = difflib.get_close_matches(choice.group(1), re.findall(r"'([^']*)'", choice.group(2)), n=1)
            if close:
                message += f" (did you mean {close[0]}?)"
        super().error(message)


def build_parser() -> argparse.ArgumentParser:
    # Every command's module is loaded to build the parser: each imports what only
    # its run needs (analyses, the parser, the writers) inside run.
    from mlprof.cli import advise, callsites, cluster, compare, export, modules, op, parse, query, run, ui

    parser = _Parser(prog="mlprof", description="mlprof: profile PyTorch training.")
    parser.add_argument("--version", action="version", version=f"mlprof {__version__}",
                        help="print mlprof's version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", help="run `mlprof COMMAND --help` for its options")
    sub.required = True
    for module in (parse, export, query, ui, run, advise, op, modules, callsites, compare, cluster):
        module.register(sub)
    return parser


def _subcommand_parser(parser: argparse.ArgumentParser, command: str | None) -> argparse.ArgumentParser:
    subparsers = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
    return subparsers.choices.get(command, parser) if subparsers is not None else parser


class _PrintableStream:
    """A text stream whose writes pass through :func:`mlprof.errors.printable` (line breaks kept): a
    path or a name from the input (an op name, a file name) never reaches the terminal as an escape
    sequence, whichever report prints it."""

    def __init__(self, stream) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        return self._stream.write(printable(text, lines=True))

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


def main(argv: list[str] | None = None) -> int:
    try:
        parser = build_parser()  # imports every command's module: a Ctrl-C here is an interrupt too
    except KeyboardInterrupt:
        print("mlprof: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    args, extra = parser.parse_known_args(argv)
    if extra:
        _subcommand_parser(parser, getattr(args, "command", None)).refuse_unknown(extra)
    stdout, stderr = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = _PrintableStream(stdout), _PrintableStream(stderr)
    try:
        return _run(args)
    finally:
        sys.stdout, sys.stderr = stdout, stderr


def _run(args: argparse.Namespace) -> int:
    try:
        return args.run(args)
    except MlprofError as exc:
        if os.environ.get("MLPROF_DEBUG"):
            raise
        # One line, whatever the message holds (a file name with a line break in it).
        print(f"mlprof {args.command}: error: {printable(exc)}", file=sys.stderr)
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
        print(f"mlprof {args.command}: internal error: {type(exc).__name__}: {printable(exc)} "
              "(set MLPROF_DEBUG=1 for a traceback)", file=sys.stderr)
        return EXIT_INTERNAL


def run() -> None:
    sys.exit(main())


if __name__ == "__main__":
    run()
