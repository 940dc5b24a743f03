"""The exports' options and file names, cheap to import (every ``mlprof`` command builds its parser from them)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from mlprof.errors import ConfigError
from mlprof.settings.options import ExportType

__all__ = ["ExportOptions", "SUMMARY_FORMATS", "EXPORT_TYPES", "DEFAULT_EXPORT_TYPES", "PARSE_TRACE_VIEW_MAX_EVENTS", "TRACE_VIEW_FILE"]

# Above this many events `mlprof parse` leaves trace_view.json to `mlprof
# export`: its JSON is ~250 bytes an event (a 1M-event trace: 250 MB, 4 s of
# CPU to write, a third of the parse), and trace viewers struggle with it.
PARSE_TRACE_VIEW_MAX_EVENTS = 500_000

TRACE_VIEW_FILE = "trace_view.json"
SUMMARY_FORMATS = ("csv", "json")
# The export types are the profiler option's (export_type): one list for `mlprof run`, a capture's config,
# `mlprof parse` and `mlprof export`.
EXPORT_TYPES = tuple(t.value for t in ExportType)
DEFAULT_EXPORT_TYPES = (ExportType.Text.value,)


@dataclass(frozen=True)
class ExportOptions:
    # Only this step's data (None: everything).
    step: int | None = None
    # Summary files as "csv" or "json".
    summary_format: str = "csv"
    # "text" (trace_view.json + summaries + communication JSON), "db" (SQLite).
    export_types: tuple[str, ...] = DEFAULT_EXPORT_TYPES
    # Where the files go (None: the output directory holding tables/).
    target_dir: Path | None = None
    # trace_view.json only when the parse has at most this many events (host
    # ops, runtime calls, device ops); None: always. `mlprof parse` defers it
    # for big traces (docs/output_files.md), `mlprof export` always writes it.
    trace_view_max_events: int | None = None

    def __post_init__(self) -> None:
        if self.summary_format not in SUMMARY_FORMATS:
            raise ConfigError(f"summary format must be one of {', '.join(SUMMARY_FORMATS)}, "
                              f"not {self.summary_format!r}")
        bad = [t for t in self.export_types if t not in EXPORT_TYPES]
        if bad or not self.export_types:
            raise ConfigError(f"export types must be among {', '.join(EXPORT_TYPES)}, not {bad or 'none'}")
