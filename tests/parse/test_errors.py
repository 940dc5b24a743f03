"""Bad input gives a clear error naming the file and the problem; no partial output."""

from __future__ import annotations

import gzip

import pytest

from mlprof.errors import CaptureError, TraceFormatError
from mlprof.parse import ParseOptions, parse_path

from .conftest import make_capture


def _parse(path, tmp_path):
    return parse_path(path, ParseOptions(output_dir=tmp_path / "out"))


@pytest.mark.parametrize("content, problem", [
    (b"", "empty file"),
    (b"   \n", "empty file"),
    (b'{"traceEvents": [{"ph": "X", "name": "a", "ts": 1', "truncated"),
    (b"not json at all", "not a valid Kineto trace"),
    (b'{"traceEvents": [{"ph": "X", "name": "a", "ts": "12", "dur": 1}]}', "$.traceEvents[0].ts"),
    (b'{"traceEvents": [{"ph": "X", "name": 5, "ts": 1, "dur": 1}]}', "$.traceEvents[0].name"),
    (b'{"traceEvents": {"not": "a list"}}', "$.traceEvents"),
    (b'{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", "ts": 1e300, "dur": 1}]}', "out of range"),
    (b'{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": -1e30}]}', "out of range"),
    (b'{"baseTimeNanoseconds": 99999999999999999999, "traceEvents": []}', "out of range"),
])
def test_bad_trace_file_raises_trace_format_error_naming_file(tmp_path, content, problem):
    path = tmp_path / "bad.pt.trace.json"
    path.write_bytes(content)
    with pytest.raises(TraceFormatError) as err:
        _parse(path, tmp_path)
    assert str(path) in str(err.value) and problem in str(err.value)
    assert "\n" not in str(err.value)
    assert not (tmp_path / "out" / "tables").exists()


@pytest.mark.parametrize("workers", ["1", "3"])
def test_wrong_type_deep_in_a_big_trace_names_the_event_index(tmp_path, monkeypatch, workers):
    monkeypatch.setenv("MLPROF_PARSE_WORKERS", workers)
    events = ",".join('{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": %d, "dur": 1}' % i
                      for i in range(25_000))
    path = tmp_path / "big.json"
    path.write_text('{"traceEvents": [' + events + ', {"ph": "X", "name": "b", "ts": 1, "dur": "x"}]}')
    with pytest.raises(TraceFormatError, match=r"traceEvents\[25000\]\.dur"):
        _parse(path, tmp_path)


def test_truncated_gzip_is_reported(tmp_path):
    path = tmp_path / "t.pt.trace.json.gz"
    path.write_bytes(gzip.compress(b'{"traceEvents": []}' * 100)[:30])
    with pytest.raises(TraceFormatError, match="gzip"):
        _parse(path, tmp_path)


def test_missing_path_and_empty_dir_are_capture_errors(tmp_path):
    with pytest.raises(CaptureError, match="no such file"):
        _parse(tmp_path / "nope", tmp_path)
    (tmp_path / "empty").mkdir()
    with pytest.raises(CaptureError, match="no mlprof capture"):
        parse_path(tmp_path / "empty")


def test_bad_steps_json_in_a_capture_names_the_file(tmp_path):
    root = make_capture(tmp_path / "c_mlprof", {0: {"events": None, "steps": [{"step": "one"}]}})
    with pytest.raises(CaptureError) as err:
        parse_path(root)
    assert "steps.json" in str(err.value)


def test_a_bad_window_is_skipped_and_reported_the_others_parsed(tmp_path):
    good = {"events": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 1.0,
                        "dur": 2.0}]}
    root = make_capture(tmp_path / "m_mlprof", {0: good, 1: {"events": [], "steps": [{"step": "x"}]}, 2: good})
    trace = root / "raw" / "window_0002" / "kineto.pt.trace.json"
    trace.write_bytes(trace.read_bytes()[:-10])  # truncated
    result = parse_path(root)[0]
    assert result.windows == [0]
    assert len(result.skipped) == 2
    assert any("window_0001/steps.json" in s for s in result.skipped)
    assert any("window_0002/kineto.pt.trace.json" in s and "truncated" in s for s in result.skipped)


def test_huge_numbers_in_capture_files_are_a_clear_error(tmp_path):
    root = make_capture(tmp_path / "h_mlprof", {0: {"events": None,
                                                    "steps": [{"step": 1, "start_ns": 0, "end_ns": 10**30}]}})
    with pytest.raises(CaptureError, match=r"steps.json.*\$\[0\]\.end_ns"):
        parse_path(root)
