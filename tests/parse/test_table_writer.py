"""Writing the tables beside the attribution gives the very tables of writing one step after the other.

Also: a table read from memory (a parse's columns not on disk yet) reads as
its file does, a failure in either thread leaves nothing behind, and text
columns written through an ENUM of the string pool are the text written as it is.
"""

from __future__ import annotations

import copy
import threading

import numpy as np
import pytest

from mlprof.errors import MlprofError
from mlprof.parse import ParseOptions, parse_path, table_writer
from mlprof.parse.build import WindowData, build_tables
from mlprof.parse.kineto import StringPool, read_kineto
from mlprof.tables.schema import TABLES
from mlprof.tables.store import TableStore, write_tables

from .conftest import write_trace
from .test_golden import EVENTS, X


def _steps_trace(tmp_path, steps: int = 40):
    """Steps of nested ops, a backward node, an optimizer step and a kernel each."""
    events = list(EVENTS)
    for i in range(steps):
        t = 1000.0 + i * 100
        events += [X(f"ProfilerStep#{i + 10}", t, 90.0, cat="user_annotation"),
                   X("aten::linear", t + 1, 20.0, **{"Input Dims": [[4, 16], [16, 16]], "Input type": ["float"]}),
                   X("aten::addmm", t + 2, 10.0),
                   X("autograd::engine::evaluate_function: AddmmBackward0", t + 30, 25.0),
                   X("Optimizer.step#SGD.step", t + 60, 20.0, cat="user_annotation"),
                   X("aten::add_", t + 61, 5.0)]
    return write_trace(tmp_path / "t.pt.trace.json", events)


def _all_rows(tables_dir) -> dict[str, list]:
    with TableStore(tables_dir) as store:
        return {name: store.rows(f'SELECT * FROM "{name}"') for name in TABLES}


@pytest.fixture
def overlap_always(monkeypatch):
    """Overlap whatever the trace's size (two workers, any row count)."""
    monkeypatch.setenv("MLPROF_PARSE_WORKERS", "2")
    monkeypatch.setattr(table_writer, "_MIN_OVERLAP_ROWS", 1)
    started = []
    real_start = table_writer._Writer.start

    def start(self):
        started.append(self.name)
        real_start(self)

    monkeypatch.setattr(table_writer._Writer, "start", start)
    return started


def test_overlapped_write_gives_the_tables_of_the_sequential_one(tmp_path, overlap_always, monkeypatch):
    trace = _steps_trace(tmp_path)
    parse_path(trace, ParseOptions(output_dir=tmp_path / "overlapped"))
    assert overlap_always == ["mlprof-write-tables"]
    monkeypatch.setattr(table_writer, "_overlaps", lambda *_: False)
    parse_path(trace, ParseOptions(output_dir=tmp_path / "sequential"))
    assert overlap_always == ["mlprof-write-tables"]  # no second thread
    overlapped = _all_rows(tmp_path / "overlapped" / "tables")
    assert overlapped == _all_rows(tmp_path / "sequential" / "tables")
    assert len(overlapped["phase_spans"]) > 40 and len(overlapped["host_ops"]) > 200


def test_a_tight_budget_or_one_core_writes_one_step_after_the_other(tmp_path, overlap_always, monkeypatch):
    trace = _steps_trace(tmp_path)
    parse_path(trace, ParseOptions(output_dir=tmp_path / "a", memory_budget_bytes=64 * 2**20))
    assert overlap_always == ["mlprof-write-tables"]  # a small trace fits even 64 MiB
    monkeypatch.setattr(table_writer, "memory_budget_bytes", lambda _: 1000)
    parse_path(trace, ParseOptions(output_dir=tmp_path / "b"))
    monkeypatch.setattr(table_writer, "memory_budget_bytes", lambda _: 2**40)
    monkeypatch.setenv("MLPROF_PARSE_WORKERS", "1")
    parse_path(trace, ParseOptions(output_dir=tmp_path / "c"))
    assert overlap_always == ["mlprof-write-tables"]
    assert _all_rows(tmp_path / "a" / "tables") == _all_rows(tmp_path / "b" / "tables") == \
        _all_rows(tmp_path / "c" / "tables")


def test_tables_read_from_memory_read_as_their_files(tmp_path):
    pool = StringPool()
    kineto = read_kineto(_steps_trace(tmp_path, steps=5), pool)
    columns = build_tables([WindowData(window_index=0, kineto=kineto)], pool, {"source.path": "x"})
    in_memory = copy.deepcopy(columns)
    write_tables(tmp_path / "tables", columns, pool.values())
    assert {"host_ops", "device_ops", "collectives", "flows", "steps", "memory_events"} <= set(in_memory)
    absent = [name for name in TABLES if name not in in_memory]
    assert "gc_pauses" in absent  # written empty; in memory, no columns read as no rows
    in_memory.update({name: {} for name in absent})
    with TableStore(tmp_path / "tables") as on_disk, \
            TableStore(tmp_path / "tables", in_memory=in_memory, strings=pool.values()) as from_memory:
        for name in TABLES:
            query = f'SELECT * FROM "{name}"'
            assert from_memory.rows(query) == on_disk.rows(query), name
            assert from_memory.sql(query).description == on_disk.sql(query).description, name


@pytest.mark.parametrize("failing", ["writer", "attribution"])
def test_a_failure_on_either_side_leaves_nothing_and_no_thread(tmp_path, overlap_always, monkeypatch, failing):
    trace = _steps_trace(tmp_path)
    out = tmp_path / "out"
    real_write, real_attribution = table_writer.write_tables, table_writer.write_attribution

    def write(out_dir, columns, strings, budget_bytes=None, only=None):
        if failing == "writer" and only is not None and "host_ops" in only:
            raise OSError(28, "No space left on device", str(out_dir / "host_ops.parquet"))
        real_write(out_dir, columns, strings, budget_bytes, only)

    def attribution(*args, **kwargs):
        if failing == "attribution":
            raise OSError(28, "No space left on device", str(args[0] / "phase_spans.parquet"))
        real_attribution(*args, **kwargs)

    monkeypatch.setattr(table_writer, "write_tables", write)
    monkeypatch.setattr(table_writer, "write_attribution", attribution)
    table = "host_ops" if failing == "writer" else "phase_spans"
    with pytest.raises(MlprofError, match=rf"{table}\.parquet: cannot write: No space left on device"):
        parse_path(trace, ParseOptions(output_dir=out))
    assert overlap_always == ["mlprof-write-tables"]
    assert not out.exists() or not any(out.iterdir())
    assert not [t for t in threading.enumerate() if t.name.startswith("mlprof-write-")]


def test_the_writer_thread_leaves_the_attribution_table_to_the_attribution(tmp_path, overlap_always, monkeypatch):
    """It writes every other table, empty ones too; a phase_spans (or backward_links) it wrote late would wipe
    the attribution's."""
    written = []
    real_write = table_writer.write_tables

    def write(out_dir, columns, strings, budget_bytes=None, only=None):
        written.append(only)
        real_write(out_dir, columns, strings, budget_bytes, only)

    monkeypatch.setattr(table_writer, "write_tables", write)
    parse_path(_steps_trace(tmp_path), ParseOptions(output_dir=tmp_path / "out"))
    assert overlap_always == ["mlprof-write-tables"]
    assert written == [tuple(name for name in TABLES if name not in ("phase_spans", "backward_links"))]
    assert {p.stem for p in (tmp_path / "out" / "tables").glob("*.parquet")} == set(TABLES)
    with TableStore(tmp_path / "out" / "tables") as store:
        assert store.count("phase_spans") > 40


@pytest.mark.parametrize("enum", [True, False])
def test_text_written_through_the_pool_enum_is_the_text(tmp_path, monkeypatch, enum):
    """Codes of equal text (a raw JSON value and a name alike, invalid UTF-8 made alike) share one
    ENUM value; NULL codes stay NULL; the files read back as VARCHAR, as without the ENUM."""
    from mlprof.tables import store as store_module

    if not enum:
        monkeypatch.setattr(store_module, "_ENUM_MAX_STRINGS", 0)
    strings = ["aten::mm", "[[4, 16]]", "[[4, 16]]", "\ufffd", "\ufffd", "", "cpu_op"]
    codes = np.array([0, 1, 2, 3, 4, 5, -1, 0, 2] * 10, dtype=np.int32)
    n = len(codes)
    columns = {"host_ops": {"op_id": np.arange(n, dtype=np.int64), "name": codes, "input_dims": codes[::-1].copy(),
                            "category": np.full(n, 6, dtype=np.int32), "start_ns": np.arange(n, dtype=np.int64),
                            "dur_ns": np.ones(n, dtype=np.int64)}}
    lookups = []
    real_load = store_module._load_strings
    monkeypatch.setattr(store_module, "_load_strings", lambda *a: lookups.append(real_load(*a)) or lookups[-1])
    write_tables(tmp_path / "tables", columns, strings)
    assert lookups == ["_enumlist" if enum else "_strlist"]
    text = [None if c < 0 else strings[c] for c in codes.tolist()]
    with TableStore(tmp_path / "tables") as store:
        assert [r[0] for r in store.rows("SELECT name FROM host_ops ORDER BY op_id")] == text
        assert [r[0] for r in store.rows("SELECT input_dims FROM host_ops ORDER BY op_id")] == text[::-1]
        assert {r[0] for r in store.rows("SELECT DISTINCT category FROM host_ops")} == {"cpu_op"}
        assert store.rows("SELECT typeof(name), typeof(input_dims) FROM host_ops LIMIT 1") == [("VARCHAR", "VARCHAR")]


def test_a_pool_too_large_for_its_cells_is_looked_up_as_text(tmp_path, monkeypatch):
    """Making the ENUM costs a little per string: a pool of more strings than the coded cells can
    pay for is not made one."""
    from mlprof.tables import store as store_module

    lookups = []
    real_load = store_module._load_strings
    monkeypatch.setattr(store_module, "_load_strings", lambda *a: lookups.append(real_load(*a)) or lookups[-1])
    strings = [f"op{i}" for i in range(1000)]
    n = 1000 * store_module._CELLS_PER_ENUM_STRING
    few = {"host_ops": {"op_id": np.arange(100, dtype=np.int64), "name": np.arange(100, dtype=np.int32)}}
    many = {"host_ops": {"op_id": np.arange(n, dtype=np.int64), "name": np.arange(n, dtype=np.int32) % 1000}}
    write_tables(tmp_path / "few", few, strings)
    write_tables(tmp_path / "many", many, strings)
    assert lookups == ["_strlist", "_enumlist"]
    with TableStore(tmp_path / "many") as store:
        assert store.rows("SELECT count(DISTINCT name), min(name), max(name) FROM host_ops") == [(1000, "op0", "op999")]


def test_statistics_of_text_written_through_the_enum_are_the_texts(tmp_path):
    """Readers skip row groups by each column's min and max: with the ENUM they must still be the
    text's (not the ENUM's order, here the reverse), or a filter would lose rows."""
    from mlprof.tables import store as store_module

    n = 70_000  # two row groups of 65,536 rows at most
    names = np.where(np.arange(n) < 65_536, 0, 1).astype(np.int32)  # "zeta" first, "alpha" after
    columns = {"host_ops": {"op_id": np.arange(n, dtype=np.int64), "name": names}}
    assert n // store_module._CELLS_PER_ENUM_STRING >= 2  # the ENUM is made
    write_tables(tmp_path, columns, ["zeta", "alpha"])
    path = tmp_path / "host_ops.parquet"
    with TableStore(tmp_path) as store:
        stats = store.rows(f"SELECT row_group_id, stats_min_value, stats_max_value FROM parquet_metadata('{path}') "
                           "WHERE path_in_schema = 'name' ORDER BY row_group_id")
        assert stats == [(0, "zeta", "zeta"), (1, "alpha", "alpha")]
        assert store.rows("SELECT count(*) FROM host_ops WHERE name = 'alpha'") == [(n - 65_536,)]
        assert store.rows("SELECT count(*) FROM host_ops WHERE name > 'b'") == [(65_536,)]
