"""``run_exports``: the export files of one parsed output directory (the writers, loaded on first use)."""

from __future__ import annotations

from pathlib import Path

from mlprof.analysis.communication import communication_matrix, communication_summary, rank_of
from mlprof.errors import ConfigError
from mlprof.export.options import ExportOptions
from mlprof.settings.options import ExportType
from mlprof.export.csv_summaries import write_summaries
from mlprof.export.sqlite import write_sqlite
from mlprof.export.trace_view import write_trace_view
from mlprof.capture.files import atomic_write, make_private_dir, output_lock
from mlprof.tables.store import TableStore, named_write_errors
from mlprof.tables.layout import TABLES_DIR

__all__ = ["run_exports", "trace_view_deferred"]


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
        if ExportType.Text.value in options.export_types:
            if not trace_view_deferred(store, options):
                written.append(write_trace_view(store, target, options.step))
            written += write_summaries(store, target, options.summary_format, options.step)
            if store.count("collectives"):
                written.append(atomic_write(target / "communication.json",
                                            _json(communication_summary(store, options.step))))
                written.append(atomic_write(target / "communication_matrix.json",
                                            _json(communication_matrix(store, options.step))))
        if ExportType.Db.value in options.export_types:
            written.append(write_sqlite(store, target, rank_of(store)))
    return written
