"""mlprof: profile PyTorch training, find what is slow, compare runs.

``import mlprof`` never imports torch; building a profiler does.
"""

from __future__ import annotations

from typing import Any

from . import dynamic, mstx
from ._version import __version__
from .config import (
    ExperimentalConfig,
    ExportType,
    HostSystem,
    ProfilerActivity,
    ProfilerLevel,
    supported_activities,
    supported_export_type,
    supported_profiler_level,
)
from .collect.handler import tensorboard_trace_handler
from .errors import MlprofError
from .schedule import ProfilerAction, schedule

__all__ = [
    "__version__",
    "profile",
    "_KinetoProfile",
    "schedule",
    "ProfilerAction",
    "ProfilerActivity",
    "ProfilerLevel",
    "ExportType",
    "HostSystem",
    "ExperimentalConfig",
    "tensorboard_trace_handler",
    "supported_activities",
    "supported_profiler_level",
    "supported_export_type",
    "mstx",
    "dynamic",
    "MlprofError",
]

_LAZY = {"profile", "_KinetoProfile"}


def __getattr__(name: str) -> Any:
    # The profiler classes live with the torch-facing code; they import torch
    # only when instantiated, but keep their module off the import path too.
    if name in _LAZY:
        from .collect import profiler

        return getattr(profiler, name)
    raise AttributeError(f"module 'mlprof' has no attribute {name!r}")
