"""TableStore.temp_table: rows from Python into a typed temporary table in one scan (DuckDB's executemany
ran one INSERT a row), NULLs and empty row lists included."""

from __future__ import annotations

from tests.analysis.test_query_budget import parsed  # noqa: F401 - the module's parsed-run fixture

from mlprof.tables.store import TableStore


def test_rows_keep_their_values_types_and_nulls(parsed):  # noqa: F811
    with TableStore(parsed / "tables") as store:
        rows = [(0, 5, "a", 2**40), (None, 6, None, -1), (2, None, "c", 0)]
        store.temp_table("_t", "window_index INTEGER, step BIGINT, name VARCHAR, big BIGINT", rows)
        assert store.rows("SELECT * FROM _t") == rows
        assert [r[1] for r in store.rows("DESCRIBE _t")] == ["INTEGER", "BIGINT", "VARCHAR", "BIGINT"]
        store.temp_table("_t", "window_index INTEGER, step BIGINT", [])  # replaced, empty, still typed
        assert store.rows("SELECT count(*) FROM _t") == [(0,)]
        assert [r[1] for r in store.rows("DESCRIBE _t")] == ["INTEGER", "BIGINT"]
        many = [(1, i) for i in range(50_000)]
        store.temp_table("_t", "window_index INTEGER, step BIGINT", many)
        assert store.rows("SELECT count(*), sum(step) FROM _t") == [(50_000, sum(range(50_000)))]
