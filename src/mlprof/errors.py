"""mlprof's exception hierarchy.

The CLI maps these to exit codes and one-line messages; library callers can
catch :class:`MlprofError` to handle every failure mlprof raises on purpose.
"""

__all__ = [
    "MlprofError",
    "ConfigError",
    "CaptureError",
    "TraceFormatError",
    "TorchUnavailableError",
    "CommandStartError",
    "MissingDependencyError",
]


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
