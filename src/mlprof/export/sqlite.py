"""Presenter of ``mlprof_{rank}.db``: the tables and the step breakdown in SQLite.

For the Db export type: every parsed table with the same columns (times in ns),
plus ``step_trace_time`` (the step breakdown, ns) and ``module_statistic`` (the module tree, ns). Written to a temporary file
and renamed.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from mlprof.analysis.modules import ModuleStat, module_tree
from mlprof.analysis.steps import StepBreakdown, step_breakdown
from mlprof.capture.files import publish_file
from mlprof.tables.schema import TABLES
from mlprof.tables.store import TableStore

__all__ = ["write_sqlite", "sqlite_name"]

_SQLITE_TYPES = {"BIGINT": "INTEGER", "INTEGER": "INTEGER", "DOUBLE": "REAL", "VARCHAR": "TEXT", "BOOLEAN": "INTEGER"}
_BATCH = 50_000


def sqlite_name(rank: int | None) -> str:
    return f"mlprof_{0 if rank is None else rank}.db"


def write_sqlite(store: TableStore, out_dir: Path, rank: int | None) -> Path:
    target = out_dir / sqlite_name(rank)
    tmp = out_dir / f".tmp_{target.name}.{os.getpid()}"
    tmp.unlink(missing_ok=True)
    db = sqlite3.connect(tmp)
    # A temporary file renamed only when complete: no journal or fsync needed.
    db.execute("PRAGMA journal_mode = OFF")
    db.execute("PRAGMA synchronous = OFF")
    try:
        for name, schema in TABLES.items():
            cols = ", ".join(f'"{c.name}" {_SQLITE_TYPES[c.sql_type]}' for c in schema.columns)
            db.execute(f'CREATE TABLE "{name}" ({cols})')
            marks = ", ".join("?" for _ in schema.columns)
            names = ", ".join(f'"{c}"' for c in schema.column_names)
            cur = store.con.execute(f'SELECT {names} FROM "{name}"')
            while batch := cur.fetchmany(_BATCH):
                db.executemany(f'INSERT INTO "{name}" VALUES ({marks})', batch)
        fields = StepBreakdown.field_names()
        db.execute("CREATE TABLE step_trace_time (%s)" % ", ".join(f'"{f}" INTEGER' for f in fields))
        db.executemany(f"INSERT INTO step_trace_time VALUES ({', '.join('?' for _ in fields)})",
                       [tuple(getattr(b, f) for f in fields) for b in step_breakdown(store)])
        tree = module_tree(store)
        db.execute("CREATE TABLE module_statistic (%s)" % ", ".join(
            f'"{f}" {"TEXT" if f in ("path", "module_type") else "INTEGER"}' for f in ModuleStat.__dataclass_fields__))
        db.executemany(f"INSERT INTO module_statistic VALUES ({', '.join('?' for _ in ModuleStat.__dataclass_fields__)})",
                       [tuple(m.to_dict().values()) for m in tree])
        db.commit()
    finally:
        db.close()
    return publish_file(tmp, target)
