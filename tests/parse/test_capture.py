"""Raw captures: every complete window parsed, partial ones skipped and reported."""

from __future__ import annotations

import json
import subprocess
import sys

from mlprof.parse import ParseOptions, parse_path
from mlprof.tables.store import TableStore

from .conftest import BASE_NS, make_capture


def _op(name, ts, dur, cat="cpu_op"):
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur}


def _window(step: int, t0: float) -> dict:
    start_ns = BASE_NS + int(t0 * 1000)
    return {
        "events": [_op(f"ProfilerStep#{step}", t0, 100.0, "user_annotation"), _op("aten::mm", t0 + 10, 50.0)],
        "steps": [{"step": step, "start_ns": start_ns, "end_ns": start_ns + 100_000}],
        "markers": {"marks": [{"name": "epoch", "ts_ns": start_ns + 5, "tid": 1}],
                    "ranges": [{"id": 1, "name": "load", "start_ns": start_ns, "end_ns": None, "tid": 1}]},
        "gc": [{"start_ns": start_ns + 70_000, "dur_ns": 2_000_000, "generation": 2, "collected": 5,
                "uncollectable": 0, "tid": 1}],
    }


def test_all_complete_windows_parsed_partial_skipped_and_reported(tmp_path):
    # Window 1 is complete on disk but not yet listed in the manifest (a kill
    # between rename and manifest rewrite): window.json is the authority.
    root = make_capture(tmp_path / "w_mlprof", {0: _window(2, 1000.0), 1: _window(5, 5000.0)},
                        status="running", partial=[2], listed=[0])
    result = parse_path(root)[0]
    assert result.windows == [0, 1]
    assert len(result.skipped) == 1 and ".partial_window_0002" in result.skipped[0]
    assert result.capture_status == "running"
    with TableStore(root / "mlprof_output" / "tables") as store:
        assert store.rows("SELECT window_index, step FROM steps ORDER BY 1") == [(0, 2), (1, 5)]
        assert store.rows("SELECT window_index, name FROM host_ops WHERE name = 'aten::mm' ORDER BY 1") == [
            (0, "aten::mm"), (1, "aten::mm")]
        assert store.rows("SELECT kind, name, end_ns FROM markers WHERE window_index = 0 ORDER BY kind") == [
            ("mark", "epoch", None), ("range", "load", None)]
        assert store.rows("SELECT window_index, dur_ns, generation, step FROM gc_pauses ORDER BY 1") == [
            (0, 2_000_000, 2, 2), (1, 2_000_000, 2, 5)]
        meta = dict(store.rows("SELECT key, value_json FROM metadata"))
        assert json.loads(meta["capture.rank"]) == 3
        assert json.loads(meta["profiler_metadata.environment"]) == {"OMP_NUM_THREADS": "2"}
    info = json.loads((root / "mlprof_output" / "parse_info.json").read_text())
    assert info["windows"] == [0, 1]


def test_level_none_window_uses_mlprof_steps(tmp_path):
    win = _window(3, 1000.0)
    win["events"] = None
    root = make_capture(tmp_path / "n_mlprof", {0: win})
    parse_path(root)
    with TableStore(root / "mlprof_output" / "tables") as store:
        assert store.rows("SELECT step, dur_ns, source FROM steps") == [(3, 100_000, "mlprof")]
        assert store.count("host_ops") == 0


def test_parsing_twice_gives_the_same_tables(tmp_path):
    root = make_capture(tmp_path / "i_mlprof", {0: _window(2, 1000.0)})
    parse_path(root)
    first = {p.name: p.read_bytes() for p in (root / "mlprof_output" / "tables").iterdir()}
    parse_path(root)
    second = {p.name: p.read_bytes() for p in (root / "mlprof_output" / "tables").iterdir()}
    assert first == second  # byte for byte
    with TableStore(root / "mlprof_output" / "tables") as store:
        assert store.count("host_ops") == 2


def test_concurrent_parses_of_one_capture_both_succeed(tmp_path):
    root = make_capture(tmp_path / "c_mlprof", {0: _window(2, 1000.0), 1: _window(4, 3000.0)})
    procs = [subprocess.Popen([sys.executable, "-m", "mlprof", "parse", str(root), "--json"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(3)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], outs
    with TableStore(root / "mlprof_output" / "tables") as store:
        assert store.rows("SELECT step FROM steps ORDER BY 1") == [(2,), (4,)]
    leftovers = [p.name for p in (root / "mlprof_output").iterdir() if p.name.startswith((".tmp", ".old"))]
    assert leftovers == []


def test_directory_of_captures_and_trace_files(tmp_path):
    make_capture(tmp_path / "jobs" / "a_mlprof", {0: _window(2, 1000.0)})
    make_capture(tmp_path / "jobs" / "b_mlprof", {0: _window(3, 1000.0)})
    (tmp_path / "jobs" / "x.pt.trace.json").write_text(json.dumps(
        {"traceEvents": [_op("aten::add", 1.0, 1.0)]}))
    results = parse_path(tmp_path / "jobs")
    assert [r.kind for r in results] == ["capture", "capture", "trace"]
    assert (tmp_path / "jobs" / "x_mlprof_output" / "tables" / "host_ops.parquet").is_file()


def test_capture_asking_for_db_export_gets_sqlite_from_the_cli(tmp_path):
    root = make_capture(tmp_path / "db_mlprof", {0: _window(2, 1000.0)},
                        config={"experimental_config": {"export_type": ["Text", "Db"]}})
    done = subprocess.run([sys.executable, "-m", "mlprof", "parse", str(root)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert (root / "mlprof_output" / "mlprof_3.db").is_file()
    assert (root / "mlprof_output" / "trace_view.json").is_file()


def test_several_captures_parsed_in_processes_match_sequential(tmp_path):
    for rank in range(3):
        make_capture(tmp_path / "seq" / f"r{rank}_mlprof", {0: _window(2 + rank, 1000.0)})
        make_capture(tmp_path / "par" / f"r{rank}_mlprof", {0: _window(2 + rank, 1000.0)})
    (tmp_path / "par" / "bad.pt.trace.json").write_text("{")
    sequential = parse_path(tmp_path / "seq")
    parallel = parse_path(tmp_path / "par", ParseOptions(jobs=2, on_error="continue"))
    # Inputs come in name order: bad.pt.trace.json first.
    assert [r.error is None for r in parallel] == [False, True, True, True]
    assert "bad.pt.trace.json" in parallel[0].error and parallel[0].error_type == "TraceFormatError"
    good = [r for r in parallel if r.error is None]
    assert [r.table_rows for r in good] == [r.table_rows for r in sequential]
    for a, b in zip(sequential, good):
        for name in ("host_ops.parquet", "steps.parquet", "gc_pauses.parquet"):
            assert (a.tables_dir / name).read_bytes() == (b.tables_dir / name).read_bytes()


def test_reparse_after_a_new_window_decodes_only_the_new_one(tmp_path):
    root = make_capture(tmp_path / "inc_mlprof", {0: _window(2, 1000.0)})
    parse_path(root)
    cached = root / "mlprof_output" / "windows" / "window_0000" / "host_ops.parquet"
    before = cached.stat().st_mtime_ns, cached.stat().st_ino
    # The job goes on: a second window lands (as the collector writes it).
    later = make_capture(tmp_path / "tmp_mlprof", {1: _window(5, 5000.0)})
    (later / "raw" / "window_0001").rename(root / "raw" / "window_0001")
    result = parse_path(root)[0]
    assert result.windows == [0, 1]
    assert (cached.stat().st_mtime_ns, cached.stat().st_ino) == before  # window 0 not parsed again
    with TableStore(root / "mlprof_output" / "tables") as store:
        assert store.rows("SELECT window_index, count(*) FROM host_ops GROUP BY 1 ORDER BY 1") == [(0, 2), (1, 2)]
        assert store.rows("SELECT count(DISTINCT op_id) FROM host_ops") == [(4,)]
        # Parents stay inside their own window after the ids are shifted.
        assert store.rows("SELECT count(*) FROM host_ops c JOIN host_ops p ON p.op_id = c.parent_op_id "
                          "WHERE p.window_index <> c.window_index") == [(0,)]
        assert store.rows("SELECT c.name, p.name FROM host_ops c JOIN host_ops p ON p.op_id = c.parent_op_id "
                          "WHERE c.window_index = 1") == [("aten::mm", "ProfilerStep#5")]
        assert json.loads(dict(store.rows("SELECT key, value_json FROM metadata WHERE window_index IS NULL"))
                          ["capture.rank"]) == 3


def test_the_parse_says_each_step_after_the_read(tmp_path):
    from .test_golden import EVENTS

    capture = make_capture(tmp_path / "cap", {0: {"events": EVENTS}, 1: {"events": EVENTS}})
    stages: list[str] = []
    parse_path(capture, ParseOptions(output_dir=tmp_path / "out", on_stage=stages.append))
    assert stages == ["window 0: building tables", "window 0: writing tables",
                      "window 1: building tables", "window 1: writing tables",
                      "stacking 2 window(s)", "attributing steps"]
    stages.clear()  # the windows' tables are cached: a second parse only stacks and attributes
    parse_path(capture, ParseOptions(output_dir=tmp_path / "out", on_stage=stages.append))
    assert stages == ["stacking 2 window(s)", "attributing steps"]
