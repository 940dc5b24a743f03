"""Presenters: files written from the parsed tables (SPEC §2 exports).

Importing this package loads only the options and file names
(:mod:`mlprof.export.options`); the writers load with ``run_exports``
(:mod:`mlprof.export.runner`).
"""

from __future__ import annotations

from typing import Any

from mlprof.export.options import (EXPORT_TYPES, PARSE_TRACE_VIEW_MAX_EVENTS, SUMMARY_FORMATS, TRACE_VIEW_FILE,
                                   ExportOptions)

__all__ = ["ExportOptions", "run_exports", "trace_view_deferred", "SUMMARY_FORMATS", "EXPORT_TYPES",
           "PARSE_TRACE_VIEW_MAX_EVENTS", "TRACE_VIEW_FILE"]


def __getattr__(name: str) -> Any:
    if name in ("run_exports", "trace_view_deferred"):
        from mlprof.export import runner

        return getattr(runner, name)
    raise AttributeError(f"module 'mlprof.export' has no attribute {name!r}")
