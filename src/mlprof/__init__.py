"""mlprof: profile PyTorch training, find what is slow, compare runs.

``import mlprof`` never imports torch; building a profiler does.
"""

from __future__ import annotations

from typing import Any

from . import dynamic, mstx
from ._version import __version__
from .settings.profiler_config import (
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
from .collect.scalars import log_scalar
from .errors import MlprofError
from .settings.schedule import ProfilerAction, schedule

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
    "log_scalar",
    "profile_from_config",
    "supported_activities",
    "supported_profiler_level",
    "supported_export_type",
    "mstx",
    "dynamic",
    "MlprofError",
    "parse_path",
    "ParseOptions",
    "ParseResult",
    "run_exports",
    "ExportOptions",
    "TableStore",
    "advise",
    "op_analyse",
    "compare",
    "cluster",
    "Thresholds",
    "Finding",
    "AdvisorReport",
    "Comparison",
    "ClusterReport",
]

# Loaded on first use: `import mlprof` in a training script must stay cheap
# (no DuckDB, no NumPy), and the profiler module is only needed to profile.
_LAZY = {
    "profile": "mlprof.collect.profiler",
    "_KinetoProfile": "mlprof.collect.profiler",
    "profile_from_config": "mlprof.collect.profile_builder",
    "parse_path": "mlprof.parse",
    "ParseOptions": "mlprof.parse",
    "ParseResult": "mlprof.parse",
    "run_exports": "mlprof.export",
    "ExportOptions": "mlprof.export",
    "TableStore": "mlprof.tables",
    **{name: "mlprof.workflow" for name in ("advise", "op_analyse", "compare", "cluster", "Thresholds",
                                                 "Finding", "AdvisorReport", "Comparison", "ClusterReport")},
}


def __getattr__(name: str) -> Any:
    module_name = _LAZY.get(name)
    if module_name is None:
        raise AttributeError(f"module 'mlprof' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module_name), name)
