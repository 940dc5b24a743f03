"""Tables on disk (one Parquet file each, written by DuckDB) and queries on them.

Parquet dictionary-encodes repeated strings, so an op name is stored once per
row group however many rows use it. Writers produce a complete set of files
in a fresh directory that the caller renames into place, so readers never see
a half-written table.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import duckdb
import numpy as np

from mlprof.errors import MlprofError
from mlprof.private_dirs import private_temp_dir
from mlprof.tables.budget import MEMORY_BUDGET_ENV, query_memory_bytes
from mlprof.tables.schema import ID_SPACES, TABLES, TableSchema

__all__ = ["TableStore", "write_tables", "combine_tables", "replace_table", "MISSING_INT", "named_write_errors",
           "remove_temporaries", "table_bytes", "stack_parts", "write_columns", "write_table_sql", "parquet_list",
           "connect"]

MISSING_INT = int(np.iinfo(np.int64).min)


_spill_dirs = itertools.count()


# How every table file is written. Parquet's version 2 pages (delta encodings for
# integers) write the 1.1M host ops of a CPU trace in 0.51-0.55 s instead of
# 0.62 s, in 9.3 MB instead of 12.5, and read as fast or faster.
PARQUET_OPTIONS = "FORMAT parquet, COMPRESSION zstd, PARQUET_VERSION V2"


def connect(budget_bytes: int | None = None) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB held to its share of the memory budget (:mod:`mlprof.tables.budget`;
    ``budget_bytes``: a command's own budget, else the environment's or the default).

    Past its limit DuckDB spills joins and sorts to a directory of its own
    (made on the first spill, removed when the connection closes) inside this
    process's private temporary directory (:func:`mlprof.private_dirs.private_temp_dir`:
    a random name, 0700), not to ``.tmp`` in the working directory, and never to
    a predictable name in the shared ``/tmp`` that another user could have made first.
    """
    con = duckdb.connect()
    # Progress is ours to show (on stderr, when asked), not DuckDB's.
    con.execute("SET enable_progress_bar = false")
    con.execute(f"SET memory_limit = '{query_memory_bytes(budget_bytes)}B'")
    spill = private_temp_dir() / f"spill-{os.getpid()}-{next(_spill_dirs)}"
    con.execute(f"SET temp_directory = '{_sql_str(spill)}'")
    return con


class TableStore:
    """Read access to a directory of table files through an embedded DuckDB."""

    def __init__(self, tables_dir: Path, budget_bytes: int | None = None,
                 in_memory: dict[str, dict[str, np.ndarray]] | None = None, strings: list[str] | None = None) -> None:
        """``in_memory``: tables of a parse not on disk yet, as :func:`write_tables` takes them
        (string columns as codes into ``strings``; no columns: no rows); they read exactly as their
        files will."""
        self.tables_dir = Path(tables_dir)
        if not self.tables_dir.is_dir():
            raise MlprofError(f"{self.tables_dir}: no parsed tables here; run `mlprof parse` first")
        self.con = connect(budget_bytes)
        self.over_budget = False
        self._metadata: dict[str, list[Any]] | None = None
        if in_memory:
            _load_strings(self.con, strings or [])
        for name in TABLES:
            path = self.tables_dir / f"{name}.parquet"
            if in_memory and in_memory.get(name):
                self.con.execute(f'CREATE VIEW "{name}" AS {_frame_select(self.con, name, in_memory[name])}')
            elif in_memory and name in in_memory:  # a table the parse has no rows for
                self.con.execute(TABLES[name].create_sql())
            elif path.is_file():
                source = f"read_parquet('{_sql_str(path)}')"
                present = {row[0] for row in self.con.execute(f"DESCRIBE SELECT * FROM {source}").fetchall()}
                # Tables an older mlprof wrote lack newer columns: they read as NULL, not as a binder error.
                missing = "".join(f', CAST(NULL AS {c.sql_type}) AS "{c.name}"'
                                  for c in TABLES[name].columns if c.name not in present)
                self.con.execute(f"CREATE VIEW \"{name}\" AS SELECT *{missing} FROM {source}")
            else:
                self.con.execute(TABLES[name].create_sql())

    def sql(self, query: str, params: list | None = None) -> duckdb.DuckDBPyRelation:
        try:
            return self.con.execute(query, params or [])
        except duckdb.OutOfMemoryException:
            # A few operators (a top-N heap, a pinned hash table) cannot spill: an answer
            # over the budget beats none. Said once, on stderr; later queries run unlimited.
            if self.over_budget:
                raise
            self.over_budget = True
            share = self.con.execute("SELECT current_setting('memory_limit')").fetchall()[0][0]
            self.con.execute("RESET memory_limit")
            sys.stderr.write(f"mlprof: a query needed more than DuckDB's {share} share of the memory budget and "
                             f"ran without it (set {MEMORY_BUDGET_ENV} higher to keep to it)\n")
            return self.con.execute(query, params or [])

    def iter_dicts(self, query: str, params: list | None = None, batch_rows: int = 10_000) -> Iterator[dict]:
        """The rows of ``query`` as :meth:`dicts` gives them, fetched a batch at a time: a file of
        millions of rows is written without holding them all. Read them all before the next query."""
        cur = self.sql(query, params)
        names = [d[0] for d in cur.description]
        while batch := cur.fetchmany(batch_rows):
            for row in batch:
                yield dict(zip(names, row))

    def rows(self, query: str, params: list | None = None) -> list[tuple]:
        return self.sql(query, params).fetchall()

    def dicts(self, query: str, params: list | None = None) -> list[dict]:
        cur = self.sql(query, params)
        names = [d[0] for d in cur.description]
        return [dict(zip(names, row)) for row in cur.fetchall()]

    def temp_table(self, name: str, columns: str, rows: list[tuple]) -> None:
        """``CREATE OR REPLACE TEMP TABLE name (columns)`` holding ``rows``, in one scan.

        ``columns`` is the column list as in SQL (``"window_index INTEGER, step BIGINT"``).
        DuckDB's ``executemany`` runs one INSERT a row: 8 s for the 20,000 steps of a
        10M-event run, where this takes milliseconds.
        """
        names_types = [c.strip().split(None, 1) for c in columns.split(",")]
        if not rows:
            self.con.execute(f"CREATE OR REPLACE TEMP TABLE {name} ({columns})")
            return
        values = {f"c{i}": np.array(col, dtype=object) for i, col in enumerate(zip(*rows))}
        self.con.register("_temp_rows", values)
        try:
            select = ", ".join(f"CAST(c{i} AS {sql_type}) AS {col}" for i, (col, sql_type) in enumerate(names_types))
            self.con.execute(f"CREATE OR REPLACE TEMP TABLE {name} AS SELECT {select} FROM _temp_rows")
        finally:
            self.con.unregister("_temp_rows")

    def _metadata_values(self) -> dict[str, list[Any]]:
        if self._metadata is None:
            self._metadata = {}
            for key, text in self.rows("SELECT key, value_json FROM metadata WHERE key IS NOT NULL "
                                       "ORDER BY window_index NULLS FIRST, key"):
                try:
                    value = json.loads(text) if text is not None else None
                except ValueError:
                    value = text  # not JSON (tables written by hand): its text
                self._metadata.setdefault(key, []).append(value)
        return self._metadata

    def metadata(self) -> dict[str, Any]:
        """Every metadata key with its value decoded from JSON (a value that is not JSON: its text); a key
        written per window: the first window's. The one reader of the ``metadata`` table, read once."""
        return {key: values[0] for key, values in self._metadata_values().items()}

    def meta(self, key: str, default: Any = None) -> Any:
        """One metadata value, decoded (as :meth:`metadata`), else ``default``."""
        values = self._metadata_values().get(key)
        return values[0] if values else default

    def meta_values(self, key: str) -> list[Any]:
        """Every window's value of ``key``, decoded, in window order (``eventCount``: one per window)."""
        return list(self._metadata_values().get(key, []))

    def count(self, table: str) -> int:
        return self.rows(f'SELECT count(*) FROM "{table}"')[0][0]

    def close(self) -> None:
        self.con.close()

    def __enter__(self) -> TableStore:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _sql_str(path: Path) -> str:
    return str(path).replace("'", "''")


def _select_list(schema: TableSchema, present: set[str], coded: set[str], lookup: str = "_strlist") -> str:
    parts = []
    for col in schema.columns:
        name = col.name
        if name in coded:
            # Code -> text by indexing the pooled string list (one scalar
            # subquery, evaluated once): a projection, so row order is kept.
            parts.append(f'CASE WHEN f."{name}" >= 0 THEN (SELECT l FROM {lookup})[f."{name}" + 1] END AS "{name}"')
        elif name not in present:
            parts.append(f'CAST(NULL AS {col.sql_type}) AS "{name}"')
        elif col.sql_type in ("BIGINT", "INTEGER"):
            parts.append(f'CAST(NULLIF(f."{name}", {MISSING_INT}) AS {col.sql_type}) AS "{name}"')
        elif col.sql_type == "DOUBLE":
            parts.append(f'CAST(CASE WHEN isnan(f."{name}") THEN NULL ELSE f."{name}" END AS DOUBLE) AS "{name}"')
        else:
            parts.append(f'CAST(f."{name}" AS {col.sql_type}) AS "{name}"')
    return ", ".join(parts)


def replace_table(tables_dir: Path, name: str, columns: dict[str, np.ndarray],
                  budget_bytes: int | None = None) -> None:
    """Write one table of a tables directory being built (text columns as object arrays)."""
    schema = TABLES[name]
    frame = {col.name: columns[col.name] for col in schema.columns if col.name in columns}
    target = _sql_str(tables_dir / f"{name}.parquet")
    con = connect(budget_bytes)
    try:
        if frame and len(next(iter(frame.values()))):
            con.register("_replaced", frame)
            try:
                con.execute(f"COPY (SELECT {_select_list(schema, set(frame), set())} FROM _replaced f) "
                            f"TO '{target}' ({PARQUET_OPTIONS})")
            finally:
                con.unregister("_replaced")
        else:  # a scratch name: the connection may have a view of the table's own name
            con.execute(schema.create_sql(f"_empty_{name}"))
            try:
                con.execute(f"COPY \"_empty_{name}\" TO '{target}' ({PARQUET_OPTIONS})")
            finally:
                con.execute(f'DROP TABLE "_empty_{name}"')
    finally:
        con.close()


def table_bytes(table: dict[str, np.ndarray] | None) -> int:
    """Memory a table's column arrays take (a broadcast column counts as if it were whole)."""
    return sum(getattr(a, "nbytes", 0) for a in (table or {}).values())


# Coded text columns are written through a DuckDB ENUM of the pool's strings where that pays: Parquet's
# writer then takes each row's dictionary index as it is, where it hashes a VARCHAR row by row (the
# 1.0M host ops of a CPU trace: 0.22 s instead of 0.38 s, the same file). Making the ENUM costs about
# 1.3 us a string, a coded cell saves about 40 ns: it is made for at most one string per 32 cells,
# and for 65,536 strings at most (85 ms to make).
_ENUM_MAX_STRINGS = 65_536
_CELLS_PER_ENUM_STRING = 32


def _load_strings(con: duckdb.DuckDBPyConnection, strings: list[str], coded_cells: int = 0) -> str:
    """The parse's string pool as one DuckDB list, for :func:`_frame_select`'s code lookups; the name
    of the list to look codes up in (``_strlist``, text, or ``_enumlist``, the ENUM ``_pool``, made
    for writing ``coded_cells`` coded values when that pays). :func:`_drop_strings` undoes it."""
    con.register("_strings_src", {"code": np.arange(len(strings), dtype=np.int32),
                                  "value": np.array(strings, dtype=object)})
    try:
        if not 0 < len(strings) <= min(_ENUM_MAX_STRINGS, coded_cells // _CELLS_PER_ENUM_STRING):
            con.execute("CREATE TABLE _strlist AS SELECT list(value ORDER BY code) AS l FROM _strings_src")
            return "_strlist"
        # Made from a query, an ENUM takes each text once (DuckDB drops repeats): codes of equal
        # text, a raw JSON value and a name alike, share one value.
        con.execute("CREATE TYPE _pool AS ENUM (SELECT value FROM _strings_src)")
        con.execute("CREATE TABLE _enumlist AS SELECT list(value::_pool ORDER BY code) AS l FROM _strings_src")
        return "_enumlist"
    finally:
        con.unregister("_strings_src")


def _drop_strings(con: duckdb.DuckDBPyConnection) -> None:
    con.execute("DROP TABLE IF EXISTS _enumlist")
    con.execute("DROP TYPE IF EXISTS _pool")
    con.execute("DROP TABLE IF EXISTS _strlist")


def _coded(name: str, data: dict[str, np.ndarray]) -> set[str]:
    """The text columns of ``data`` (one table's, as :func:`write_tables` takes them) held as pool codes."""
    return {c.name for c in TABLES[name].columns
            if c.sql_type == "VARCHAR" and c.name in data and data[c.name].dtype != object}


def _coded_cells(data: dict[str, np.ndarray] | None, name: str) -> int:
    """Coded text values among one table's columns."""
    data = data or {}
    return sum(len(data[c]) for c in _coded(name, data))


def _frame_select(con: duckdb.DuckDBPyConnection, name: str, data: dict[str, np.ndarray],
                  extra: tuple[str, ...] = (), lookup: str = "_strlist") -> str:
    """Register one table's in-memory columns; the SELECT that gives its rows as its file holds them
    (and the ``extra`` columns of ``data`` after them, as they are).

    The one definition of how decoded columns become a table (NULLs, types,
    string codes), shared by the writer and by a store over tables not yet written. ``lookup``: the
    list codes are looked up in (:func:`_load_strings`).
    """
    schema = TABLES[name]
    frame = {col.name: data[col.name] for col in schema.columns if col.name in data}
    coded = _coded(name, frame)
    con.register(f"_frame_{name}", {**frame, **{e: data[e] for e in extra}})
    more = "".join(f', f."{e}"' for e in extra)
    return f"SELECT {_select_list(schema, set(frame), coded, lookup)}{more} FROM _frame_{name} f"


def parquet_list(paths: list[Path]) -> str:
    """``read_parquet`` of ``paths``, as SQL."""
    return "read_parquet([" + ", ".join(f"'{_sql_str(p)}'" for p in paths) + "])"


def stack_parts(out_dir: Path, name: str, parts: list[Path], budget_bytes: int | None = None, *,
                con: duckdb.DuckDBPyConnection | None = None, join: str = "",
                replaced: dict[str, str] | None = None) -> int:
    """The table ``name`` from its parts (written by :func:`write_tables` with ``order``), rows in
    ``_order`` (DuckDB sorts beyond memory, on disk); returns its row count.

    ``join``: SQL joined to the parts (aliased ``p``) on ``con``; ``replaced``: columns taken from
    it instead, as SQL expressions.
    """
    schema = TABLES[name]
    target = _sql_str(out_dir / f"{name}.parquet")
    own = con is None
    con = connect(budget_bytes) if own else con
    try:
        if not parts:
            con.execute(schema.create_sql(f"_empty_{name}"))
            con.execute(f"COPY \"_empty_{name}\" TO '{target}' ({PARQUET_OPTIONS})")
            con.execute(f'DROP TABLE "_empty_{name}"')
            return 0
        replaced = replaced or {}
        names = ", ".join(f'{replaced.get(c, f"p.{c}")} AS "{c}"' for c in schema.column_names)
        return _copy_in_order(con, f"SELECT {names} FROM {parquet_list(parts)} p {join} ORDER BY p._order", target)
    finally:
        if own:
            con.close()


def _copy_in_order(con: duckdb.DuckDBPyConnection, select: str, target: str) -> int:
    """``select`` (ordered) into the table file ``target``; returns the rows written."""
    return con.execute(f"COPY ({select}) TO '{target}' ({PARQUET_OPTIONS}, ROW_GROUP_SIZE 65536)").fetchall()[0][0]


def write_columns(path: Path, columns: dict[str, np.ndarray], budget_bytes: int | None = None, *,
                  con: duckdb.DuckDBPyConnection | None = None) -> None:
    """Numpy columns to one Parquet file as they are (sentinels and string codes kept): a scratch part.
    ``con``: an open connection to write with (opening one takes milliseconds)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    own = con is None
    con = connect(budget_bytes) if own else con
    try:
        con.register("_columns", columns)
        try:
            con.execute(f"COPY (SELECT * FROM _columns) TO '{_sql_str(path)}' ({PARQUET_OPTIONS})")
        finally:
            con.unregister("_columns")
    finally:
        if own:
            con.close()


def write_table_sql(con: duckdb.DuckDBPyConnection, out_dir: Path, name: str, relation: str, present: set[str],
                    coded: set[str], strings: list[str]) -> int:
    """The table ``name`` from ``relation`` (SQL whose columns are as :func:`write_tables` takes numpy
    columns: sentinels for NULL, string codes into ``strings`` for ``coded``), rows in its ``_order``."""
    _load_strings(con, strings)
    try:
        return _copy_in_order(con, f"SELECT {_select_list(TABLES[name], present, coded)} FROM ({relation}) f "
                              "ORDER BY f._order", _sql_str(out_dir / f"{name}.parquet"))
    finally:
        _drop_strings(con)


def write_tables(out_dir: Path, columns: dict[str, dict[str, np.ndarray]], strings: list[str],
                 budget_bytes: int | None = None, only: tuple[str, ...] | None = None,
                 order: dict[str, np.ndarray] | None = None) -> None:
    """Write every declared table (or those named in ``only``) to ``out_dir/<name>.parquet``.

    ``columns`` maps a table name to its column arrays: integer columns use
    :data:`MISSING_INT` for NULL, string columns are int32 codes into
    ``strings`` (-1 = NULL) unless already object arrays. Tables absent from
    ``columns`` are written empty, so every table always exists. DuckDB
    streams each table from the numpy arrays straight into Parquet.

    ``columns`` is consumed: each table's arrays are dropped once it is
    written, smallest table first, so the largest is written while little
    else is held.

    ``order``: for a part of a table (:func:`stack_parts`), each row's place
    in the whole table, written as a column ``_order``.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    con = connect(budget_bytes)
    # One thread: each table is one sequential COPY from numpy, and every
    # extra thread holds its own row groups while they fill (on a 4.5M-event
    # trace, 2 threads peaked at 1.07 GB, 1 thread at 0.70 GB, in the same time).
    con.execute("SET threads = 1")
    try:
        names = sorted(TABLES if only is None else only, key=lambda name: table_bytes(columns.get(name)))
        lookup = _load_strings(con, strings, sum(_coded_cells(columns.get(name), name) for name in names))
        for name in names:
            schema = TABLES[name]
            data = columns.pop(name, None) or {}
            target = _sql_str(out_dir / f"{name}.parquet")
            if len(next((data[c.name] for c in schema.columns if c.name in data), ())):
                extra = ("_order",) if order is not None else ()
                select = _frame_select(con, name, {**data, "_order": order[name]} if extra else data, extra, lookup)
                del data
                # DuckDB holds a row group or two while it encodes them; half its default
                # (122,880 rows) held 20 MB less beside host_ops, files of the same size.
                con.execute(f"COPY ({select}) TO '{target}' ({PARQUET_OPTIONS}, ROW_GROUP_SIZE 65536)")
                con.unregister(f"_frame_{name}")
            else:
                con.execute(schema.create_sql())
                con.execute(f"COPY \"{name}\" TO '{target}' ({PARQUET_OPTIONS})")
                con.execute(f'DROP TABLE "{name}"')
    finally:
        con.close()


def combine_tables(out_dir: Path, parts: list[Path], metadata: list[tuple[str, str]],
                   capture_counters: dict[str, np.ndarray] | None = None,
                   capture_rows: dict[str, dict[str, np.ndarray]] | None = None,
                   budget_bytes: int | None = None) -> dict[str, int]:
    """Stack per-window table directories into one set of tables in ``out_dir``.

    Each part numbers its row ids from 0; ids are shifted by the rows of the
    parts before it (``Column.id_space``). ``metadata`` adds capture-level
    rows (window_index NULL), ``capture_counters`` capture-level counter rows
    (host samples), ``capture_rows`` capture-level rows of other tables
    (training scalars; text columns as object arrays). Rows keep part order, then file order. Returns
    the row count of each table.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    con = connect(budget_bytes)
    counts: dict[str, int] = {}
    try:
        rows = {name: [con.execute(f"SELECT count(*) FROM read_parquet('{_sql_str(p / f'{name}.parquet')}')")
                       .fetchall()[0][0] for p in parts] for name in TABLES}
        offsets = {space: np.concatenate([[0], np.cumsum(rows[table])[:-1]]).tolist() if parts else []
                   for space, table in ID_SPACES.items()}
        con.register("_capture_meta", {"key": np.array([k for k, _ in metadata], dtype=object),
                                       "value_json": np.array([v for _, v in metadata], dtype=object)})
        for name, schema in TABLES.items():
            selects = []
            for k, part in enumerate(parts):
                cols = ", ".join(
                    f'"{c.name}" + {offsets[c.id_space][k]} AS "{c.name}"' if c.id_space else f'"{c.name}"'
                    for c in schema.columns)
                source = _sql_str(part / f"{name}.parquet")
                selects.append(f"SELECT {k} AS _part, file_row_number AS _row, {cols} "
                               f"FROM read_parquet('{source}', file_row_number = true)")
            if name == "metadata" and metadata:
                selects.insert(0, "SELECT -1 AS _part, 0 AS _row, CAST(NULL AS INTEGER) AS window_index, "
                                  "key, value_json FROM _capture_meta")
            extra_counters = 0
            if name == "counters" and capture_counters is not None and len(capture_counters["ts_ns"]):
                extra_counters = len(capture_counters["ts_ns"])
                con.register("_capture_counters", capture_counters)
                selects.append(f"SELECT {len(parts)} AS _part, 0 AS _row, CAST(NULL AS INTEGER) AS window_index, "
                               "name, series, pid, ts_ns, value FROM _capture_counters")
            extra_rows = 0
            frame = (capture_rows or {}).get(name)
            if frame is not None and len(next(iter(frame.values()))):
                extra_rows = len(next(iter(frame.values())))
                con.register(f"_capture_{name}", {**frame, "_row": np.arange(extra_rows, dtype=np.int64)})
                # window_index stays NULL: these rows belong to the capture, not to a window.
                present = set(frame) - {"window_index"}
                selects.append(f"SELECT {len(parts) + 1} AS _part, f._row AS _row, "
                               f"{_select_list(schema, present, set())} FROM _capture_{name} f")
            target = _sql_str(out_dir / f"{name}.parquet")
            names = ", ".join(f'"{c}"' for c in schema.column_names)
            if selects:
                con.execute(f"COPY (SELECT {names} FROM ({' UNION ALL '.join(selects)}) ORDER BY _part, _row) "
                            f"TO '{target}' ({PARQUET_OPTIONS})")
            else:
                con.execute(schema.create_sql())
                con.execute(f"COPY \"{name}\" TO '{target}' ({PARQUET_OPTIONS})")
                con.execute(f'DROP TABLE "{name}"')
            counts[name] = (sum(rows[name]) + (len(metadata) if name == "metadata" else 0) + extra_counters
                            + extra_rows)
    finally:
        con.close()
    return counts


_DUCKDB_WRITE = re.compile(r'Could not write file \\?"(?P<file>[^"\\]+)\\?": (?P<why>[^"\\]+)')


@contextmanager
def named_write_errors(out_dir: Path) -> Iterator[None]:
    """A write into ``out_dir`` that fails (disk full, read-only) becomes an
    MlprofError naming the file (exit 5), and this process's temporary files
    there are removed, so nothing half-written is left behind."""
    try:
        yield
    except MlprofError:
        remove_temporaries(out_dir)
        raise
    except (OSError, duckdb.Error) as exc:
        remove_temporaries(out_dir)
        if isinstance(exc, OSError):
            where, why = exc.filename or out_dir, exc.strerror or str(exc)
        else:
            m = _DUCKDB_WRITE.search(str(exc))
            where, why = (m.group("file"), m.group("why")) if m else (out_dir, str(exc).splitlines()[0])
        raise MlprofError(f"{where}: cannot write: {why}") from None


def remove_temporaries(out_dir: Path) -> None:
    """This process's temporary files and dirs in ``out_dir`` (``.tmp_*<pid>*``, ``.*.tmp<pid>``)."""
    pid = str(os.getpid())
    try:
        entries = list(Path(out_dir).iterdir())
    except OSError:
        return
    for entry in entries:
        if entry.name.startswith(".") and "tmp" in entry.name and pid in entry.name:
            shutil.rmtree(entry, ignore_errors=True) if entry.is_dir() else entry.unlink(missing_ok=True)
