"""Presenters: files written from the parsed tables (SPEC §2 exports)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from mlprof.analysis.communication import communication_matrix, communication_summary, rank_of
from mlprof.errors import ConfigError
from mlprof.export.csv_summaries import write_summaries
from mlprof.export.sqlite import write_sqlite
from mlprof.export.trace_view import TRACE_VIEW_FILE, write_trace_view
from mlprof.capture.files import atomic_write, make_private_dir, output_lock
from mlprof.tables.store import TableStore, named_write_errors
from mlprof.tables.layout import TABLES_DIR

__all__ = ["ExportOptions", "run_exports", "trace_view_deferred", "SUMMARY_FORMATS", "EXPORT_TYPES",
           "PARSE_TRACE_VIEW_MAX_EVENTS", "TRACE_VIEW_FILE"]

# Above this many events `mlprof parse` leaves trace_view.json to `mlprof
# export`: its JSON is ~250 bytes an event (a 1M-event trace: 250 MB, 4 s of
# CPU to write, a third of the parse), and trace viewers struggle with it.
PARSE_TRACE_VIEW_MAX_EVENTS = 500_000

SUMMARY_FORMATS = ("csv", "json")
EXPORT_TYPES = ("text", "db")


@dataclass(frozen=True)
class ExportOptions:
    # Only this step's data (None: everything).
    step: int | None = None
    # Summary files as "csv" or "json".
    summary_format: str = "csv"
    # "text" (trace_view.json + summaries + communication JSON), "db" (SQLite).
    export_types: tuple[str, ...] = ("text",)
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


def _json(data) -> str:
    import json

    def ns_to_us(obj):
        return str(obj)
    return json.dumps(data, indent=1, default=ns_to_us)


def trace_view_deferred(store: TableStore, options: ExportOptions) -> bool:
    """Whether trace_view.json is left out (too many events for ``options``)."""
    if options.trace_view_max_events is None:
        return False
    events = store.rows("SELECT (SELECT count(*) FROM host_ops) + (SELECT count(*) FROM runtime_calls) "
                        "+ (SELECT count(*) FROM device_ops)")[0][0]
    return events > options.trace_view_max_events


def run_exports(output_dir: Path, options: ExportOptions = ExportOptions()) -> list[Path]:
    """Write the export files of one parsed output directory; returns their paths."""
    output_dir = Path(output_dir)
    target = make_private_dir(Path(options.target_dir) if options.target_dir else output_dir)
    written: list[Path] = []
    # Under the output's lock: a concurrent `mlprof parse` of the same capture
    # must not swap the tables while they are being read.
    with output_lock(output_dir), TableStore(output_dir / TABLES_DIR) as store, named_write_errors(target):
        if options.step is not None and not store.rows("SELECT 1 FROM steps WHERE step = ?", [options.step]):
            steps = [r[0] for r in store.rows("SELECT DISTINCT step FROM steps ORDER BY 1")]
            raise ConfigError(f"{output_dir}: no step {options.step} (steps: "
                              f"{', '.join(map(str, steps)) or 'none recorded'})")
        if "text" in options.export_types:
            if not trace_view_deferred(store, options):
                written.append(write_trace_view(store, target, options.step))
            written += write_summaries(store, target, options.summary_format, options.step)
            if store.count("collectives"):
                written.append(atomic_write(target / "communication.json",
                                            _json(communication_summary(store, options.step))))
                written.append(atomic_write(target / "communication_matrix.json",
                                            _json(communication_matrix(store, options.step))))
        if "db" in options.export_types:
            written.append(write_sqlite(store, target, rank_of(store)))
    return written
