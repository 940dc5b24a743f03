"""The mlprof command line as a user runs it: real subprocesses, exit codes, one-line errors."""

from __future__ import annotations

import json

import pytest

from .conftest import run_cli

NCCL = "nccl_parser_config/nccl_data.json.gz"


def test_parse_query_export_on_a_real_trace(shared_traces, tmp_path):
    out = tmp_path / "out"
    parsed = run_cli("parse", str(shared_traces / NCCL), "--output", str(out), "--json", "--no-progress")
    assert parsed.returncode == 0, parsed.stderr
    report = json.loads(parsed.stdout)
    assert report[0]["event_count"] == 40573
    assert "trace_view.json" in report[0]["exports"] and "step_trace_time.csv" in report[0]["exports"]
    assert (out / "tables" / "host_ops.parquet").is_file()

    query = run_cli("query", str(out), "--json")
    assert query.returncode == 0, query.stderr
    info = json.loads(query.stdout)[0]
    assert info["rank"] == 0 and info["devices"] == [0] and info["step_count"] == 3
    assert [s["step"] for s in info["slowest_steps"]] == [6, 4, 5]
    assert info["slowest_steps"][0]["dur_ns"] == round(224936.243 * 1000)
    assert info["raw_bytes"] == (shared_traces / NCCL).stat().st_size

    text = run_cli("query", str(out))
    assert text.returncode == 0 and "slowest steps" in text.stdout and "#6 224.936 ms" in text.stdout

    exported = run_cli("export", str(out), "--step", "5", "--summary-format", "json", "--export-type", "text",
                       "--export-type", "db", "--json")
    assert exported.returncode == 0, exported.stderr
    files = {p.rsplit("/", 1)[-1] for p in json.loads(exported.stdout)[0]["files"]}
    assert {"trace_view.json", "step_trace_time.json", "mlprof_0.db"} <= files
    assert json.loads((out / "step_5" / "step_trace_time.json").read_text())[0]["Step"] == 5


def test_installed_script_and_module_agree(shared_traces, tmp_path):
    trace = shared_traces / "cpu_only/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz"
    a = run_cli("parse", str(trace), "--output", str(tmp_path / "a"), "--json", module=False)
    b = run_cli("parse", str(trace), "--output", str(tmp_path / "b"), "--json")
    assert a.returncode == b.returncode == 0, (a.stderr, b.stderr)
    strip = lambda r: [{k: v for k, v in e.items() if k not in ("output_dir", "parse_seconds")}
                       for e in json.loads(r.stdout)]
    assert strip(a) == strip(b)


@pytest.mark.parametrize("content, code, problem", [
    (b"", 4, "empty file"),
    (b'{"traceEvents": [{"ph": "X", "ts": 1.5, "dur"', 4, "truncated"),
    (b'{"traceEvents": [{"ph": "X", "name": "a", "ts": 1, "dur": [1]}]}', 4, "$.traceEvents[0].dur"),
])
def test_bad_input_is_one_line_error_with_exit_code(tmp_path, content, code, problem):
    bad = tmp_path / "bad.pt.trace.json"
    bad.write_bytes(content)
    result = run_cli("parse", str(bad))
    assert result.returncode == code
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert str(bad) in lines[0] and problem in lines[0]
    assert "Traceback" not in result.stderr and result.stdout == ""


def test_missing_path_and_bad_step_and_bad_option(tmp_path, shared_traces):
    missing = run_cli("query", str(tmp_path / "nope"))
    assert missing.returncode == 3 and "no such file" in missing.stderr
    assert len(missing.stderr.strip().splitlines()) == 1
    out = tmp_path / "out"
    assert run_cli("parse", str(shared_traces / NCCL), "--output", str(out), "--tables-only").returncode == 0
    bad_step = run_cli("export", str(out), "--step", "42")
    assert bad_step.returncode == 2 and "no step 42" in bad_step.stderr and "4, 5, 6" in bad_step.stderr
    usage = run_cli("export", str(out), "--summary-format", "xml")
    assert usage.returncode == 2 and "invalid choice" in usage.stderr


def test_parse_works_with_torch_uninstalled(shared_traces, tmp_path):
    out = tmp_path / "out"
    result = run_cli("parse", str(shared_traces / NCCL), "--output", str(out), "--export-type", "text",
                     "--export-type", "db", "--json", block_torch=True)
    assert result.returncode == 0, result.stderr
    assert (out / "trace_view.json").is_file() and (out / "mlprof_0.db").is_file()
    query = run_cli("query", str(out), "--json", block_torch=True)
    assert query.returncode == 0 and json.loads(query.stdout)[0]["step_count"] == 3


def test_progress_bar_on_request(shared_traces, tmp_path):
    result = run_cli("parse", str(shared_traces / NCCL), "--output", str(tmp_path / "o"), "--progress",
                     "--tables-only")
    assert result.returncode == 0
    # Honest progress: bytes of the file read, of its size (0.7 MiB gzipped).
    assert "parsing nccl_data.json.gz [" in result.stderr and "100% 0.7/0.7 MiB" in result.stderr
    # Then what the parse does with no more of the file to read, in order.
    after = result.stderr.split("100% 0.7/0.7 MiB\n")[-1]
    assert after == "  building tables ...\n  writing tables and attributing steps ...\n"
    quiet = run_cli("parse", str(shared_traces / NCCL), "--output", str(tmp_path / "q"), "--tables-only")
    assert quiet.stderr == ""


def test_directory_with_one_bad_trace_parses_the_others_and_exits_partial(tmp_path, shared_traces):
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    good = shared_traces / "cpu_only/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz"
    (jobs / "a.pt.trace.json.gz").write_bytes(good.read_bytes())
    (jobs / "b.pt.trace.json").write_text('{"traceEvents": [')
    (jobs / "c.pt.trace.json.gz").write_bytes(good.read_bytes())
    result = run_cli("parse", str(jobs), "--json")
    assert result.returncode == 6  # partial: two parsed, one bad
    report = json.loads(result.stdout)
    assert [e["error"] is None for e in report] == [True, False, True]
    assert "b.pt.trace.json" in report[1]["error"] and "truncated" in report[1]["error"]
    assert (jobs / "a_mlprof_output" / "trace_view.json").is_file()
    assert (jobs / "c_mlprof_output" / "trace_view.json").is_file()
    assert not (jobs / "b_mlprof_output" / "tables").exists()
    assert result.stderr.count("\n") == 1 and "b.pt.trace.json" in result.stderr
