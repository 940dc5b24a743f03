"""Writing the largest table beside the attribution gives the very tables of writing one step after the other.

Also: a table read from memory (a parse's columns not on disk yet) reads as
its file does, and a failure in either thread leaves nothing behind.
"""

from __future__ import annotations

import copy
import threading

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
    assert overlap_always == ["mlprof-write-host_ops"]
    monkeypatch.setattr(table_writer, "_overlapped_table", lambda *_: None)
    parse_path(trace, ParseOptions(output_dir=tmp_path / "sequential"))
    assert overlap_always == ["mlprof-write-host_ops"]  # no second thread
    overlapped = _all_rows(tmp_path / "overlapped" / "tables")
    assert overlapped == _all_rows(tmp_path / "sequential" / "tables")
    assert len(overlapped["phase_spans"]) > 40 and len(overlapped["host_ops"]) > 200


def test_a_tight_budget_or_one_core_writes_one_step_after_the_other(tmp_path, overlap_always, monkeypatch):
    trace = _steps_trace(tmp_path)
    parse_path(trace, ParseOptions(output_dir=tmp_path / "a", memory_budget_bytes=64 * 2**20))
    assert overlap_always == ["mlprof-write-host_ops"]  # a small trace fits even 64 MiB
    monkeypatch.setattr(table_writer, "memory_budget_bytes", lambda _: 1000)
    parse_path(trace, ParseOptions(output_dir=tmp_path / "b"))
    monkeypatch.setattr(table_writer, "memory_budget_bytes", lambda _: 2**40)
    monkeypatch.setenv("MLPROF_PARSE_WORKERS", "1")
    parse_path(trace, ParseOptions(output_dir=tmp_path / "c"))
    assert overlap_always == ["mlprof-write-host_ops"]
    assert _all_rows(tmp_path / "a" / "tables") == _all_rows(tmp_path / "b" / "tables") == \
        _all_rows(tmp_path / "c" / "tables")


def test_tables_read_from_memory_read_as_their_files(tmp_path):
    pool = StringPool()
    kineto = read_kineto(_steps_trace(tmp_path, steps=5), pool)
    columns = build_tables([WindowData(window_index=0, kineto=kineto)], pool, {"source.path": "x"})
    in_memory = copy.deepcopy(columns)
    write_tables(tmp_path / "tables", columns, pool.values())
    assert {"host_ops", "device_ops", "collectives", "flows", "steps", "memory_events"} <= set(in_memory)
    with TableStore(tmp_path / "tables") as on_disk, \
            TableStore(tmp_path / "tables", in_memory=in_memory, strings=pool.values()) as from_memory:
        for name in in_memory:
            query = f'SELECT * FROM "{name}"'
            assert from_memory.rows(query) == on_disk.rows(query), name
            assert from_memory.sql(query).description == on_disk.sql(query).description, name


@pytest.mark.parametrize("failing", ["writer", "attribution"])
def test_a_failure_on_either_side_leaves_nothing_and_no_thread(tmp_path, overlap_always, monkeypatch, failing):
    trace = _steps_trace(tmp_path)
    out = tmp_path / "out"
    real_write, real_attribution = table_writer.write_tables, table_writer.write_attribution

    def write(out_dir, columns, strings, budget_bytes=None, only=None):
        if failing == "writer" and only == ("host_ops",):
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
    assert overlap_always == ["mlprof-write-host_ops"]
    assert not out.exists() or not any(out.iterdir())
    assert not [t for t in threading.enumerate() if t.name.startswith("mlprof-write-")]
