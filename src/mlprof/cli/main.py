"""``mlprof`` command line: argparse wiring and error-to-exit-code mapping only.

Every failure mlprof raises on purpose becomes one line on stderr naming the
file and the problem, and an exit code; never a traceback (set MLPROF_DEBUG=1
to see one).
"""

from __future__ import annotations

import argparse
import os
import sys

from mlprof.errors import CaptureError, CommandStartError, ConfigError, MlprofError, TraceFormatError

__all__ = ["main", "build_parser", "EXIT_CODES", "EXIT_PARTIAL"]

EXIT_OK = 0
EXIT_INTERNAL = 1
EXIT_USAGE = 2
EXIT_CAPTURE = 3
EXIT_TRACE_FORMAT = 4
EXIT_OTHER = 5
# Several inputs: some parsed and written, others failed (each reported).
EXIT_PARTIAL = 6
# mlprof run: the command could not be started (as a shell says "not found").
EXIT_NOT_STARTED = 127
EXIT_INTERRUPTED = 130

EXIT_CODES = {ConfigError: EXIT_USAGE, CaptureError: EXIT_CAPTURE, TraceFormatError: EXIT_TRACE_FORMAT,
              CommandStartError: EXIT_NOT_STARTED}


def build_parser() -> argparse.ArgumentParser:
    from mlprof.cli import advise, callsites, cluster, compare, export, modules, op, parse, query, run, ui

    parser = argparse.ArgumentParser(prog="mlprof", description="mlprof: profile PyTorch training.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for module in (parse, export, query, ui, run, advise, op, modules, callsites, compare, cluster):
        module.register(sub)
    return parser


def _exit_code(exc: MlprofError) -> int:
    for kind, code in EXIT_CODES.items():
        if isinstance(exc, kind):
            return code
    return EXIT_OTHER


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.run(args)
    except MlprofError as exc:
        if os.environ.get("MLPROF_DEBUG"):
            raise
        print(f"mlprof {args.command}: error: {exc}", file=sys.stderr)
        return _exit_code(exc)
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
