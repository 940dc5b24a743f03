"""The metadata table has one reader, TableStore.metadata / meta / meta_values: twelve queries in ten modules
each decoded its JSON their own way (a bad value was None in one, its text in another, a crash in a third;
a key written per window was the first window's in some and the last's in others)."""

from __future__ import annotations

import ast
from pathlib import Path

import duckdb

import mlprof
from mlprof.tables.store import TableStore


def _store(tmp_path: Path, rows: list[tuple]) -> TableStore:
    tables = tmp_path / "tables"
    tables.mkdir()
    con = duckdb.connect()
    con.execute("CREATE TABLE m (window_index INTEGER, key VARCHAR, value_json VARCHAR)")
    con.executemany("INSERT INTO m VALUES (?, ?, ?)", rows)
    con.execute(f"COPY m TO '{tables / 'metadata.parquet'}' (FORMAT parquet)")
    return TableStore(tables)


def test_values_are_decoded_once_the_same_way_for_every_reader(tmp_path):
    with _store(tmp_path, [(1, "eventCount", "20"), (0, "eventCount", "10"), (None, "capture.rank", "3"),
                           (0, "distributedInfo", '{"rank": 5}'), (0, "note", "not json")]) as store:
        assert store.meta("eventCount") == 10 and store.meta_values("eventCount") == [10, 20]
        assert store.meta("note") == "not json" and store.meta("absent", "x") == "x"
        assert store.metadata() == {"capture.rank": 3, "distributedInfo": {"rank": 5}, "eventCount": 10,
                                    "note": "not json"}
        from mlprof.analysis.communication import rank_of

        assert rank_of(store) == 3


def test_only_the_store_reads_the_metadata_table():
    src = Path(mlprof.__file__).parent
    readers = sorted(str(f.relative_to(src)) for f in src.rglob("*.py") if f.name != "store.py"
                     for node in ast.walk(ast.parse(f.read_text()))
                     if isinstance(node, ast.Constant) and isinstance(node.value, str)
                     and "from metadata" in " ".join(node.value.lower().split()))
    assert readers == []
