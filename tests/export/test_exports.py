"""Export files: valid Chrome trace, summaries whose numbers check out, SQLite, docs."""

from __future__ import annotations

import csv
import gzip
import json
import re
import sqlite3
from collections import defaultdict
from pathlib import Path

import pytest

from mlprof.errors import ConfigError
from mlprof.export import ExportOptions, run_exports
from mlprof.export.chrome_trace import ChromeTraceProblem, validate_chrome_trace
from mlprof.export.summaries import SUMMARIES
from mlprof.parse import ParseOptions, parse_path
from mlprof.tables.schema import TABLES
from mlprof.tables.store import TableStore

from shared_data import GPU_TRACES, REPO_ROOT

NCCL = "nccl_parser_config/nccl_data.json.gz"


def _parsed(shared_traces, name, tmp_path) -> Path:
    return Path(parse_path(shared_traces / name, ParseOptions(output_dir=tmp_path / "out"))[0].output_dir)


def _us_to_ns(text: str) -> int:
    whole, frac = text.split(".")
    sign = -1 if whole.startswith("-") else 1
    return sign * (abs(int(whole)) * 1000 + int(frac))


def _csv(path: Path) -> list[dict]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


@pytest.mark.parametrize("name", GPU_TRACES)
def test_trace_view_is_a_valid_chrome_trace_with_flows_and_steps(shared_traces, tmp_path, name):
    out = _parsed(shared_traces, name, tmp_path)
    run_exports(out)
    n_events = validate_chrome_trace(out / "trace_view.json")
    doc = json.loads((out / "trace_view.json").read_text())
    events = doc["traceEvents"]
    assert n_events == len(events) > 0
    assert all(isinstance(e["ts"], (int, float)) for e in events if e["ph"] != "M")
    kernels = [e for e in events if e.get("cat") == "kernel"]
    src = json.loads(gzip.decompress((shared_traces / name).read_bytes()))
    assert len(kernels) == sum(1 for e in src["traceEvents"] if e.get("cat") == "kernel")
    flows = [e for e in events if e["ph"] in ("s", "f") and e.get("cat") == "ac2g"]
    assert flows and max(e["id"] for e in flows) < 2**53
    steps_in_source = sum(1 for e in src["traceEvents"]  # host spans, and their device-side annotations
                          if e.get("ph") == "X" and str(e.get("name", "")).startswith("ProfilerStep#"))
    # Each step once, under torch's name: the trace's own ProfilerStep#N, no second span on mlprof's track.
    assert sum(1 for e in events if e["ph"] == "X" and e["name"].startswith("ProfilerStep#")) == steps_in_source


def test_validator_rejects_what_viewers_misread(tmp_path):
    bad = tmp_path / "bad.json"
    for doc, problem in [
        ({"traceEvents": [{"ph": "X", "ts": "1", "dur": 1, "pid": 1, "tid": 1}]}, "ts"),
        ({"traceEvents": [{"ph": "s", "id": 2**53, "ts": 1, "pid": 1, "tid": 1}]}, r"2\^53"),
        ({"traceEvents": [{"ph": "s", "id": 3, "ts": 1, "pid": 1, "tid": 1}]}, "not both"),
        ({"traceEvents": [{"ph": "X", "ts": 1, "dur": -1, "pid": 1, "tid": 1}]}, "duration"),
        ({"events": []}, "traceEvents"),
    ]:
        bad.write_text(json.dumps(doc))
        with pytest.raises(ChromeTraceProblem, match=problem):
            validate_chrome_trace(bad)


def test_kernel_details_csv_sums_to_the_trace_and_steps_add_up(shared_traces, tmp_path):
    out = _parsed(shared_traces, NCCL, tmp_path)
    run_exports(out)
    src = json.loads(gzip.decompress((shared_traces / NCCL).read_bytes()))
    direct = defaultdict(int)
    for e in src["traceEvents"]:
        if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"):
            direct[e["name"]] += round(e["dur"] * 1000)
    from_csv = defaultdict(int)
    for row in _csv(out / "kernel_details.csv"):
        from_csv[row["Name"]] += _us_to_ns(row["Duration(us)"])
    assert from_csv == direct
    rows = _csv(out / "step_trace_time.csv")
    assert len(rows) == 3
    for row in rows:
        ns = {k: _us_to_ns(v) for k, v in row.items() if k.endswith("(us)") and k != "Start(us)"}
        assert ns["Computing(us)"] + ns["Communication(Not Overlapped)(us)"] + ns["Free(us)"] \
            + ns["Preparing(us)"] == ns["Duration(us)"]
        assert ns["Data Loading(us)"] + ns["Forward(us)"] + ns["Backward(us)"] + ns["Optimizer(us)"] \
            + ns["Host Communication(us)"] + ns["GC(us)"] + ns["Python(us)"] + ns["Other(us)"] == ns["Duration(us)"]
        assert ns["Communication(us)"] > 0
    comm = json.loads((out / "communication.json").read_text())
    assert comm["rank"] == 0
    assert {c["collective_name"] for c in comm["collectives"]} == {"allreduce", "broadcast"}
    matrix = json.loads((out / "communication_matrix.json").read_text())
    assert {(m["collective_name"], tuple(m["dst_ranks"])) for m in matrix} == {
        ("allreduce", (0, 1)), ("broadcast", (0, 1))}


def test_no_communication_files_without_collectives(shared_traces, tmp_path):
    out = _parsed(shared_traces, "ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz", tmp_path)
    names = {p.name for p in run_exports(out)}
    assert "communication.json" not in names and "trace_view.json" in names
    assert not (out / "communication.json").exists()


def test_one_step_as_json_summaries(shared_traces, tmp_path):
    out = _parsed(shared_traces, NCCL, tmp_path)
    target = tmp_path / "step5"
    run_exports(out, ExportOptions(step=5, summary_format="json", target_dir=target))
    steps = json.loads((target / "step_trace_time.json").read_text())
    assert [s["Step"] for s in steps] == [5]
    kernels = json.loads((target / "kernel_details.json").read_text())
    assert kernels and {k["Step"] for k in kernels} == {5}
    validate_chrome_trace(target / "trace_view.json")
    with pytest.raises(ConfigError, match="no step 99"):
        run_exports(out, ExportOptions(step=99, target_dir=target))


def test_sqlite_export_holds_every_table(shared_traces, tmp_path):
    out = _parsed(shared_traces, NCCL, tmp_path)
    (db_path,) = run_exports(out, ExportOptions(export_types=("db",)))
    assert db_path.name == "mlprof_0.db"
    db = sqlite3.connect(db_path)
    tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert set(TABLES) | {"step_trace_time"} <= tables
    src = json.loads(gzip.decompress((shared_traces / NCCL).read_bytes()))
    n_kernels = sum(1 for e in src["traceEvents"] if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"))
    assert db.execute("SELECT count(*) FROM device_ops").fetchone()[0] == n_kernels
    assert db.execute("SELECT count(*) FROM step_trace_time").fetchone()[0] == 3
    assert oct(db_path.stat().st_mode & 0o777) == oct(0o640)


def test_every_output_file_and_column_is_documented():
    doc = (REPO_ROOT / "docs" / "output_files.md").read_text()
    for summary in SUMMARIES:
        assert f"{summary.stem}.csv" in doc, summary.stem
        for col in summary.columns:
            assert f"`{col.name}`" in doc, (summary.stem, col.name)
    for table in TABLES.values():
        assert f"`{table.name}`" in doc
        for col in table.columns:
            assert re.search(rf"`{re.escape(col.name)}`", doc), (table.name, col.name)
    for name in ("trace_view.json", "communication.json", "communication_matrix.json", "mlprof_{rank}.db",
                 "parse_info.json"):
        assert name in doc



def test_capture_markers_gc_and_steps_reach_the_timeline(tmp_path):
    base = 1_700_000_000_000_000_000
    window = tmp_path / "c_mlprof" / "raw" / "window_0000"
    window.mkdir(parents=True)
    (tmp_path / "c_mlprof" / "profiler_info.json").write_text(json.dumps({"status": "finished", "rank": 0}))
    (window / "window.json").write_text(json.dumps({"index": 0, "status": "complete", "files": {
        "kineto": "kineto.pt.trace.json", "steps": "steps.json", "markers": "markers.json", "gc": "gc.json"}}))
    (window / "kineto.pt.trace.json").write_text(json.dumps({"baseTimeNanoseconds": base, "traceEvents": [
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0.0, "dur": 100.0},
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 10.0, "dur": 50.0}]}))
    (window / "steps.json").write_text(json.dumps([{"step": 1, "start_ns": base, "end_ns": base + 100_000}]))
    (window / "markers.json").write_text(json.dumps({
        "marks": [{"name": "epoch start", "ts_ns": base + 1_000, "tid": 1}],
        "ranges": [{"id": 3, "name": "dataloader", "start_ns": base + 2_000, "end_ns": base + 9_000, "tid": 1}]}))
    (window / "gc.json").write_text(json.dumps([{"start_ns": base + 60_000, "dur_ns": 5_000, "generation": 2,
                                                 "collected": 7, "uncollectable": 0, "tid": 1}]))
    result = parse_path(tmp_path / "c_mlprof")[0]
    run_exports(Path(result.output_dir))
    trace = Path(result.output_dir) / "trace_view.json"
    validate_chrome_trace(trace)
    doc = json.loads(trace.read_text())
    events = doc["traceEvents"]
    by_name = {e["name"]: e for e in events if e["ph"] != "M"}
    assert by_name["epoch start"]["ph"] == "i"
    assert by_name["dataloader"]["ph"] == "X" and by_name["dataloader"]["dur"] == 7.0
    assert by_name["GC gen 2"]["dur"] == 5.0 and by_name["GC gen 2"]["args"]["collected"] == 7
    # The step keeps torch's name and appears once: re-parsing the file finds one step, not two.
    assert [e["dur"] for e in events if e["name"] == "ProfilerStep#1"] == [100.0]
    with TableStore(parse_path(trace, ParseOptions(output_dir=tmp_path / "again"))[0].tables_dir) as again:
        assert again.rows("SELECT step, dur_ns FROM steps") == [(1, 100_000)]
    # Absolute time survives: base + ts(µs) * 1000 is the wall clock of the op.
    assert doc["baseTimeNanoseconds"] + round(by_name["aten::mm"]["ts"] * 1000) == base + 10_000
    assert [r["Step"] for r in _csv(Path(result.output_dir) / "step_trace_time.csv")] == ["1"]


def test_trace_view_of_a_big_parse_is_left_to_export_and_written_when_asked(shared_traces, tmp_path):
    out = _parsed(shared_traces, NCCL, tmp_path)
    small = run_exports(out, ExportOptions(trace_view_max_events=10))
    assert "trace_view.json" not in {p.name for p in small} and not (out / "trace_view.json").exists()
    assert (out / "op_statistic.csv").is_file()  # the summaries are still written
    asked = run_exports(out, ExportOptions())  # `mlprof export`: always
    assert (out / "trace_view.json") in asked and (out / "trace_view.json").stat().st_size > 0


def test_parse_cli_says_where_a_deferred_trace_view_comes_from(shared_traces, tmp_path, monkeypatch):
    import mlprof.cli.parse as cli_parse
    from mlprof.cli.main import main

    monkeypatch.setattr(cli_parse, "PARSE_TRACE_VIEW_MAX_EVENTS", 10)
    out = tmp_path / "o"
    assert main(["parse", str(shared_traces / NCCL), "--output", str(out), "--no-progress"]) == 0
    assert not (out / "trace_view.json").exists()
    assert main(["parse", str(shared_traces / NCCL), "--output", str(out), "--no-progress", "--trace-view"]) == 0
    assert (out / "trace_view.json").is_file()


def test_steps_only_mlprof_measured_get_a_span_named_as_torch_names_steps(tmp_path):
    # A Level_none capture: no Kineto trace, steps from steps.json only.
    base = 1_700_000_000_000_000_000
    window = tmp_path / "c_mlprof" / "raw" / "window_0000"
    window.mkdir(parents=True)
    (tmp_path / "c_mlprof" / "profiler_info.json").write_text(json.dumps({
        "schema_version": 1, "kind": "mlprof.capture", "status": "finished",
        "windows": [{"index": 0, "dir": "raw/window_0000", "status": "complete"}]}))
    (window / "window.json").write_text(json.dumps({"index": 0, "status": "complete", "files": {"steps": "steps.json"}}))
    (window / "steps.json").write_text(json.dumps([{"step": 4, "start_ns": base, "end_ns": base + 50_000},
                                                   {"step": 5, "start_ns": base + 50_000, "end_ns": base + 80_000}]))
    result = parse_path(tmp_path / "c_mlprof")[0]
    run_exports(Path(result.output_dir), ExportOptions(trace_view_max_events=None))
    trace = Path(result.output_dir) / "trace_view.json"
    validate_chrome_trace(trace)
    steps = [e for e in json.loads(trace.read_text())["traceEvents"] if e.get("name", "").startswith("ProfilerStep#")]
    assert [(e["name"], e["dur"]) for e in steps] == [("ProfilerStep#4", 50.0), ("ProfilerStep#5", 30.0)]
    with TableStore(parse_path(trace, ParseOptions(output_dir=tmp_path / "again"))[0].tables_dir) as again:
        assert again.rows("SELECT step, dur_ns FROM steps ORDER BY step") == [(4, 50_000), (5, 30_000)]
