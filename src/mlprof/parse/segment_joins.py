"""What the segmented build pairs by id across the whole trace, done by DuckDB on parts on disk.

A kernel takes its host op and step from the runtime call that launched it,
found by correlation id; a flow's start meets its end by flow id. Either may
lie anywhere in the trace, so neither can be built a stretch of time at a
time (:mod:`mlprof.parse.segments`). Both sides go to disk as Parquet parts
and DuckDB joins them, sorting and hashing beyond its share of the budget on
disk. The rules are the whole-trace build's (:func:`build._build_device`,
:func:`build.build_flows`), and ``tests/parse/test_segments.py`` holds the
two to the same tables.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import numpy as np

from mlprof.parse.build import TableParts, build_collectives
from mlprof.parse.kineto_events import FLOW_END, FLOW_START, MISSING, StringPool
from mlprof.parse.spill import SpilledTrace
from mlprof.tables.store import parquet_list, stack_parts, write_columns, write_table_sql, write_tables

__all__ = ["Launches", "write_device_ops", "write_flows"]


class Launches:
    """Per runtime call with a correlation id: its row in the trace, host op, step and communication
    op (-1: none), written a stretch at a time as parts under ``parts_dir``."""

    def __init__(self, parts_dir: Path, budget_bytes: int | None) -> None:
        self.parts_dir = parts_dir
        self.budget_bytes = budget_bytes
        self.parts: list[Path] = []

    def add(self, correlation: np.ndarray, rows: np.ndarray, host_op: np.ndarray, step: np.ndarray,
            comm: np.ndarray | None) -> None:
        keep = correlation != MISSING
        if not keep.any():
            return
        part = self.parts_dir / f"launches_{len(self.parts):05d}.parquet"
        write_columns(part, {
            "correlation": correlation[keep], "row": rows[keep], "host_op_id": host_op[keep], "step": step[keep],
            "comm": (comm[keep] if comm is not None else np.full(int(keep.sum()), -1)).astype(np.int64)},
            self.budget_bytes)
        self.parts.append(part)

    def table(self, con: duckdb.DuckDBPyConnection) -> None:
        """The temporary table ``_launch``: per correlation id, its first runtime call in the trace (as
        the whole build's lookup finds it); sentinels kept."""
        if not self.parts:
            con.execute("CREATE OR REPLACE TEMP TABLE _launch "
                        "(correlation BIGINT, host_op_id BIGINT, step BIGINT, comm BIGINT)")
            return
        con.execute("CREATE OR REPLACE TEMP TABLE _launch AS SELECT correlation, arg_min(host_op_id, row) AS host_op_id, "
                    "arg_min(step, row) AS step, arg_min(comm, row) AS comm "
                    f"FROM {parquet_list(self.parts)} GROUP BY correlation")


def _chunks(trace: SpilledTrace, kind: str, rows_per_chunk: int, names: list[str] | None = None):
    """Consecutive pieces' columns of ``kind``, about ``rows_per_chunk`` rows at a time, with their first row."""
    first = trace.rows_before(kind)
    group: list[int] = []
    held = 0
    pieces = trace.overlapping(kind, None, None)
    for at, index in enumerate(pieces):
        group.append(index)
        held += trace.pieces[index]["spilled"][kind][0]
        if held >= rows_per_chunk or at == len(pieces) - 1:
            yield int(first[group[0]]), trace.columns(kind, group, names)
            group, held = [], 0


def write_device_ops(out_dir: Path, parts_dir: Path, trace: SpilledTrace, pool: StringPool, step_of,
                     launches: Launches, rest: TableParts, w: int, rows_per_chunk: int,
                     con: duckdb.DuckDBPyConnection, budget_bytes: int | None) -> int:
    """``device_ops.parquet`` a chunk of rows at a time, each kernel joined to its launch; the
    collectives (few: one a communication kernel) go to ``rest``. Returns the device ops' rows."""
    coll = trace.columns("collectives")
    coll_rows = coll["device_row"] if coll else np.zeros(0, dtype=np.int64)
    at_rows: dict[str, np.ndarray] = {}
    coll_correlation = np.full(len(coll_rows), MISSING, dtype=np.int64)
    coll_time_step = np.full(len(coll_rows), MISSING, dtype=np.int64)
    parts = []
    for n, (first, dev) in enumerate(_chunks(trace, "device", rows_per_chunk)):
        count = len(dev["name"])
        rows = np.arange(first, first + count, dtype=np.int64)
        # Without a launch record a kernel belongs to the step it ran in; the join puts the launch's first.
        time_step = step_of(dev["start_ns"])
        tables = TableParts(pool)
        tables.add("device_ops", w, {**dev, "device_op_id": rows, "host_op_id": np.full(count, MISSING),
                                     "step": time_step})
        write_tables(parts_dir / f"device_{n:05d}", tables.result(), pool.values(), budget_bytes, ("device_ops",),
                     {"device_ops": rows})
        parts.append(parts_dir / f"device_{n:05d}" / "device_ops.parquet")
        inside = np.flatnonzero((coll_rows >= first) & (coll_rows < first + count))
        if len(inside):
            local = coll_rows[inside] - first
            for name in ("name", "device", "stream", "start_ns", "dur_ns"):
                if name not in at_rows:
                    at_rows[name] = np.zeros(len(coll_rows), dtype=dev[name].dtype)
                at_rows[name][inside] = dev[name][local]
            coll_correlation[inside] = dev["correlation"][local]
            coll_time_step[inside] = time_step[local]
        del dev, tables
    launches.table(con)
    count = stack_parts(out_dir, "device_ops", parts, budget_bytes, con=con,
                        join="LEFT JOIN _launch l ON p.correlation = l.correlation",
                        replaced={"host_op_id": f"NULLIF(l.host_op_id, {MISSING})",
                                  "step": f"COALESCE(NULLIF(l.step, {MISSING}), p.step)"})
    if len(coll_rows):
        con.register("_coll", {"i": np.arange(len(coll_rows)), "correlation": coll_correlation})
        try:
            found = con.execute(f"SELECT COALESCE(l.step, {MISSING}) AS step, COALESCE(l.comm, {MISSING}) AS comm "
                                "FROM _coll c LEFT JOIN _launch l ON c.correlation = l.correlation "
                                "ORDER BY c.i").fetchnumpy()
        finally:
            con.unregister("_coll")
        launch_step = np.asarray(found["step"], dtype=np.int64)
        at_rows["step"] = np.where(launch_step != MISSING, launch_step, coll_time_step)
        build_collectives(coll, w, pool, rest, 0, at_rows, np.asarray(found["comm"], dtype=np.int64))
    return count


_FLOW_COLUMNS = ("ph", "category", "flow_id", "pid", "tid", "ts_ns")


def write_flows(out_dir: Path, parts_dir: Path, trace: SpilledTrace, pool: StringPool, w: int, rows_per_chunk: int,
                con: duckdb.DuckDBPyConnection, budget_bytes: int | None) -> int:
    """``flows.parquet``: each flow's start and end paired as :func:`build.build_flows` pairs them.

    Events of one (category, id) in file order: a start meets the end pending before it, or waits,
    replacing any start still waiting (and the same for an end). So in each run of events whose
    phases alternate, the 1st and 2nd pair, the 3rd and 4th, ...; a run starts at the key's first
    event and wherever a phase repeats. Pairs come in the order of their second event.
    """
    parts = []
    for first, columns in _chunks(trace, "flows", rows_per_chunk, list(_FLOW_COLUMNS)):
        at = np.flatnonzero((columns["ph"] == FLOW_START) | (columns["ph"] == FLOW_END))
        if len(at):
            part = parts_dir / f"flows_{len(parts):05d}.parquet"
            write_columns(part, {**{name: values[at] for name, values in columns.items()}, "row": at + first}, con=con)
            parts.append(part)
    if not parts:
        return stack_parts(out_dir, "flows", [], budget_bytes, con=con)
    source = parquet_list(parts)

    def side(column: str, phase: int) -> str:
        return f"any_value({column}) FILTER (WHERE ph = {phase})"

    pair = (f"flow_id, category, {side('pid', FLOW_START)} AS start_pid, {side('tid', FLOW_START)} AS start_tid, "
            f"{side('ts_ns', FLOW_START)} AS start_ns, {side('pid', FLOW_END)} AS end_pid, "
            f"{side('tid', FLOW_END)} AS end_tid, {side('ts_ns', FLOW_END)} AS end_ns, {int(w)} AS window_index, "
            "max(row) AS _order")
    # Nearly every key is one start and one end: paired by one aggregate. Only the others go
    # through the windows (3-4x slower), which number each run's events.
    con.execute(f"CREATE OR REPLACE TEMP TABLE _flow_keys AS SELECT category, flow_id, count(*) AS n, "
                f"count(*) FILTER (WHERE ph = {FLOW_START}) AS starts FROM {source} GROUP BY category, flow_id")
    clean = "SELECT category, flow_id FROM _flow_keys WHERE n = 2 AND starts = 1"
    messy = f"SELECT * FROM {source} ANTI JOIN ({clean}) USING (category, flow_id)"
    key = "PARTITION BY category, flow_id ORDER BY row"
    runs = (f"SELECT *, sum(CASE WHEN ph = prev_ph THEN 1 ELSE 0 END) OVER (PARTITION BY category, flow_id "
            f"ORDER BY row ROWS UNBOUNDED PRECEDING) AS run FROM (SELECT *, lag(ph) OVER ({key}) AS prev_ph "
            f"FROM ({messy}))")
    placed = f"SELECT *, row_number() OVER (PARTITION BY category, flow_id, run ORDER BY row) AS place FROM ({runs})"
    relation = (f"SELECT {pair} FROM {source} SEMI JOIN ({clean}) USING (category, flow_id) GROUP BY category, flow_id "
                f"UNION ALL SELECT {pair} FROM ({placed}) GROUP BY category, flow_id, run, (place + 1) // 2 "
                "HAVING count(*) = 2")
    present = {"flow_id", "category", "start_pid", "start_tid", "start_ns", "end_pid", "end_tid", "end_ns",
               "window_index"}
    try:
        return write_table_sql(con, out_dir, "flows", relation, present, {"category"}, pool.values())
    finally:
        con.execute("DROP TABLE IF EXISTS _flow_keys")
