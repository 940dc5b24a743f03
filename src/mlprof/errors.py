"""mlprof's exception hierarchy.

The CLI maps these to exit codes and one-line messages; library callers can
catch :class:`MlprofError` to handle every failure mlprof raises on purpose.
"""

import re

__all__ = [
    "MlprofError",
    "ConfigError",
    "CaptureError",
    "TraceFormatError",
    "TorchUnavailableError",
    "CommandStartError",
    "MissingDependencyError",
    "printable",
]

# What a terminal would act on rather than show: C0 controls (escape sequences start with ESC,
# a newline breaks the one-line rule), DEL, C1 controls (0x9b is a one-byte CSI), the
# direction overrides that make a name read differently, and the lone surrogates that
# stand for a file name's undecodable bytes (printing one raises UnicodeEncodeError).
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")

_LAYOUT = re.compile("([\n\r\t]+)")


def _escape(m: re.Match) -> str:
    code = ord(m.group())
    if 0xDC80 <= code <= 0xDCFF:  # an undecodable byte of a file name (surrogateescape)
        return f"\\x{code - 0xDC00:02x}"
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: object, lines: bool = False) -> str:
    """``text`` safe to write to a terminal: control characters (ANSI escape sequences, newlines),
    direction overrides and undecodable bytes of file names spelled as ``\\xNN`` / ``\\uNNNN``.
    ``lines``: keep line breaks, carriage returns and tabs (a report of several lines, a progress bar).
    Every line mlprof prints that may hold a path or a name from its input goes through it."""
    text = str(text)
    if lines:
        return "".join(_UNPRINTABLE.sub(_escape, part) if i % 2 == 0 else part
                       for i, part in enumerate(_LAYOUT.split(text)))
    return _UNPRINTABLE.sub(_escape, text)


class MlprofError(Exception):
    """Base class of every error mlprof raises deliberately."""


class ConfigError(MlprofError, ValueError):
    """An option, schedule or config file has an invalid value."""


class CaptureError(MlprofError):
    """A raw capture directory is missing, incomplete or unreadable."""


class TraceFormatError(MlprofError):
    """A trace file is truncated, malformed or of an unknown format."""


class TorchUnavailableError(MlprofError, ImportError):
    """A collection feature needs torch (or torch_npu) and it is not installed."""


class CommandStartError(MlprofError):
    """``mlprof run``: the command could not be started (not found, not executable): exit 127."""


class MissingDependencyError(MlprofError, ImportError):
    """An optional part of mlprof needs a library that is not installed (the message says what to install)."""
