"""A trace without steps, judged as one step spanning each capture window.

Benchmark and inference traces often have no ``ProfilerStep#N`` spans; every
rule measures against step time and looks at rows inside steps. Rather than
teach each rule a second mode, a separate connection over the same table files
shadows the tables with temporary views in which the whole window is step 0.
The caller's store is left untouched.
"""

from __future__ import annotations

from mlprof.tables.phases import window_extents
from mlprof.tables.schema import TABLES
from mlprof.tables.store import TableStore

__all__ = ["whole_trace_store", "WHOLE_TRACE_STEP"]

WHOLE_TRACE_STEP = 0


def whole_trace_store(store: TableStore) -> TableStore | None:
    """A new store over ``store``'s files where each window is one step; None when there is no event."""
    whole = TableStore(store.tables_dir)
    db = whole.rows("SELECT current_database()")[0][0].replace('"', '""')
    spans = window_extents(whole)
    if not spans:
        whole.close()
        return None
    # Temporary views shadow the file-backed views of the same name (the temp schema is searched first).
    for name, schema in TABLES.items():
        if name == "steps" or "step" not in schema.column_names:
            continue
        whole.con.execute(f'CREATE TEMP VIEW "{name}" AS SELECT * REPLACE (coalesce(step, {WHOLE_TRACE_STEP}) '
                          f'AS step) FROM "{db}".main."{name}"')
    whole.temp_table("_whole_steps", "window_index INTEGER, step BIGINT, start_ns BIGINT, end_ns BIGINT, "
                     "dur_ns BIGINT, source VARCHAR",
                     [(w, WHOLE_TRACE_STEP, lo, hi, hi - lo, "whole_trace") for w, lo, hi in spans])
    whole.con.execute("CREATE TEMP VIEW steps AS SELECT * FROM _whole_steps")
    return whole
