"""The one table from mlprof's errors to exit codes (used by ``main`` and the subcommands)."""

from __future__ import annotations

from mlprof.errors import CaptureError, CommandStartError, ConfigError, TraceFormatError

__all__ = ["EXIT_CODES", "EXIT_OK", "EXIT_INTERNAL", "EXIT_USAGE", "EXIT_CAPTURE", "EXIT_TRACE_FORMAT",
           "EXIT_OTHER", "EXIT_PARTIAL", "EXIT_SLOWER", "EXIT_INCONCLUSIVE", "EXIT_NOT_STARTED", "EXIT_INTERRUPTED",
           "exit_code_for"]

EXIT_OK = 0
EXIT_INTERNAL = 1
EXIT_USAGE = 2
EXIT_CAPTURE = 3
EXIT_TRACE_FORMAT = 4
EXIT_OTHER = 5
# Several inputs: some parsed and written, others failed (each reported).
EXIT_PARTIAL = 6
# mlprof compare --fail-if-slower: NEW is slower beyond noise and the margin (a verdict, not an error).
EXIT_SLOWER = 9
# mlprof compare --fail-if-slower --strict: the runs cannot tell (too few steps or runs).
EXIT_INCONCLUSIVE = 10
# mlprof run: the command could not be started (as a shell says "not found").
EXIT_NOT_STARTED = 127
EXIT_INTERRUPTED = 130

EXIT_CODES = {ConfigError: EXIT_USAGE, CaptureError: EXIT_CAPTURE, TraceFormatError: EXIT_TRACE_FORMAT,
              CommandStartError: EXIT_NOT_STARTED}


def exit_code_for(exc: BaseException) -> int:
    """The exit code of an mlprof error (EXIT_OTHER for one without its own)."""
    for kind, code in EXIT_CODES.items():
        if isinstance(exc, kind):
            return code
    return EXIT_OTHER
