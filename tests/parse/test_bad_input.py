"""Hostile or corrupt traces are bad input: TraceFormatError (exit 4) naming the
file and the JSON path, never an internal error."""

from __future__ import annotations

import os

import pytest

from mlprof.errors import TraceFormatError
from mlprof.parse import ParseOptions, parse_path

_EV = '{"ph":"X","cat":"cpu_op","name":"a","pid":1,"tid":1,"ts":1,"dur":2%s}'


@pytest.mark.parametrize("text, where", [
    (b'{"traceEvents":' + b"[" * 5000 + b"]" * 5000 + b"}", "nested too deep"),
    (('{"traceEvents":[%s]}' % (_EV % ',"args":{"External id":123456789012345678901234567890}')).encode(),
     "$.traceEvents[0].args.External id: integer"),
    (('{"traceEvents":[%s,%s]}' % (_EV % "", (_EV % ',"args":{"correlation":18446744073709551616}').replace("cpu_op", "cuda_runtime"))).encode(),
     "$.traceEvents[1].args.correlation"),
    (('{"traceEvents":[%s]}' % (_EV % "").replace('"a"', '"a\xff"')).encode("latin-1"),
     "$.traceEvents[0]: invalid UTF-8"),
    (b'{"traceEvents":[{"ph":"X","cat":"cpu_op","name":"a","pid":1,"tid":1,"ts":1}]}',
     "$.traceEvents[0].dur: missing"),
    (b'{"traceEvents":[{"ph":"X","cat":"cpu_op","name":"a","pid":99999999999999999999,"tid":1,"ts":1,"dur":1}]}',
     "$.traceEvents[0].pid"),
    (b'{"traceEvents":[{"ph":"X","cat":"cpu_op","name":"a","pid":1,"tid":1,"ts":1e300,"dur":1}]}',
     "$.traceEvents[0].ts"),
    (b'{"traceEvents":[{"ph":"X","cat":"cpu_op","name":"a","pid":1,"tid":1,"ts":1682725898242253.5,"dur":1e30}]}',
     "out of range"),
])
def test_hostile_values_are_bad_input_with_their_json_path(tmp_path, text, where):
    path = tmp_path / "t.pt.trace.json"
    path.write_bytes(text)
    with pytest.raises(TraceFormatError) as err:
        parse_path(path, ParseOptions(output_dir=tmp_path / "out"))
    assert str(path) in str(err.value) and where in str(err.value)
    assert "\n" not in str(err.value)
    assert not (tmp_path / "out" / "tables").exists()


def test_full_disk_while_writing_tables_names_the_file_and_leaves_nothing(tmp_path, monkeypatch):
    import duckdb

    from mlprof.errors import MlprofError
    from mlprof.parse import table_writer

    real = table_writer.write_tables

    def write_then_fail(out_dir, columns, strings, budget_bytes=None, only=None):
        real(out_dir, columns, strings, budget_bytes, only)
        raise duckdb.IOException(f'IO Error: {{"exception_message":"Could not write file \\"{out_dir}/steps.parquet'
                                 f'\\": No space left on device","errno":"28"}}')

    monkeypatch.setattr(table_writer, "write_tables", write_then_fail)
    trace = tmp_path / "in" / "t.pt.trace.json"
    trace.parent.mkdir()
    trace.write_text('{"traceEvents":[' + _EV % "" + "]}")
    before = sorted(p.name for p in trace.parent.iterdir())
    with pytest.raises(MlprofError, match=r"steps\.parquet: cannot write: No space left on device"):
        parse_path(trace, ParseOptions())
    assert sorted(p.name for p in trace.parent.iterdir()) == before  # no output dir, no .tmp_*


def test_failed_rewrite_keeps_the_previous_complete_tables(tmp_path, monkeypatch):
    from mlprof.errors import MlprofError
    from mlprof.parse import table_writer

    trace = tmp_path / "t.pt.trace.json"
    trace.write_text('{"traceEvents":[' + _EV % "" + "]}")
    out = tmp_path / "out"
    parse_path(trace, ParseOptions(output_dir=out))
    info = (out / "parse_info.json").read_text()

    def fail(*_a, **_k):
        raise OSError(28, "No space left on device", str(out / ".tmp_tables_1" / "host_ops.parquet"))

    monkeypatch.setattr(table_writer, "write_tables", fail)
    with pytest.raises(MlprofError, match="host_ops.parquet: cannot write: No space left"):
        parse_path(trace, ParseOptions(output_dir=out))
    assert (out / "parse_info.json").read_text() == info
    assert sorted(p.name for p in out.iterdir() if p.name.startswith(".tmp")) == []


def _one_window_capture(tmp_path):
    from .conftest import make_capture
    from .test_golden import EVENTS

    return make_capture(tmp_path / "cap", {0: {"events": EVENTS}, 1: {"events": EVENTS}})


@pytest.mark.parametrize("damage, why", [
    (lambda k: k.unlink(), "listed in window.json but missing"),
    (lambda k: (k.unlink(), os.mkfifo(k)), "not a regular file"),
    (lambda k: (k.unlink(), k.symlink_to("/etc/hostname")), "a symlink"),
])
def test_window_with_missing_or_hostile_trace_is_skipped_not_empty(tmp_path, damage, why):
    from mlprof.errors import CaptureError

    root = _one_window_capture(tmp_path)
    damage(root / "raw" / "window_0001" / "kineto.pt.trace.json")
    result = parse_path(root, ParseOptions())[0]
    assert result.windows == [0] and any(why in s for s in result.skipped)
    damage(root / "raw" / "window_0000" / "kineto.pt.trace.json")
    with pytest.raises(CaptureError, match="no complete window to parse"):
        parse_path(root, ParseOptions())


@pytest.mark.parametrize("change, why", [
    ({"schema_version": 99}, "schema_version 99 is not supported"),
    ({"schema_version": "1"}, "schema_version '1'"),
    ({"rank": "zero"}, "rank must be int"),
    ({"windows": {}}, "windows must be list"),
    ({"pid": 2**70}, "pid .* out of range"),
])
def test_bad_manifest_is_a_capture_error(tmp_path, change, why):
    import json

    from mlprof.errors import CaptureError

    root = _one_window_capture(tmp_path)
    info = json.loads((root / "profiler_info.json").read_text())
    info.update(change)
    (root / "profiler_info.json").write_text(json.dumps(info))
    with pytest.raises(CaptureError, match=why):
        parse_path(root, ParseOptions())
    assert not (root / "mlprof_output").exists()


def test_gzip_that_expands_beyond_the_cap_is_refused_naming_the_cap(tmp_path, monkeypatch):
    import gzip

    path = tmp_path / "bomb.pt.trace.json.gz"
    path.write_bytes(gzip.compress(b'{"traceEvents":[' + b" " * 200_000 + b"]}"))
    monkeypatch.setenv("MLPROF_MAX_TRACE_BYTES", "100000")
    with pytest.raises(TraceFormatError, match="expands beyond 100,000 bytes.*MLPROF_MAX_TRACE_BYTES"):
        parse_path(path, ParseOptions(output_dir=tmp_path / "out"))
    assert not (tmp_path / "out").exists()


def test_multi_member_gzip_is_read_whole_and_truncated_gzip_refused(tmp_path):
    import gzip

    text = ('{"traceEvents":[' + ",".join([_EV % ""] * 3) + "]}").encode()
    path = tmp_path / "t.pt.trace.json.gz"
    path.write_bytes(gzip.compress(text[:40]) + gzip.compress(text[40:]))
    assert parse_path(path, ParseOptions(output_dir=tmp_path / "out"))[0].event_count == 3
    path.write_bytes(gzip.compress(text)[:-12])
    with pytest.raises(TraceFormatError, match="corrupt or truncated gzip"):
        parse_path(path, ParseOptions(output_dir=tmp_path / "out2"))


def test_huge_op_name_or_args_text_is_refused_with_its_path(tmp_path):
    path = tmp_path / "t.pt.trace.json"
    path.write_text('{"traceEvents":[' + _EV % "" + "," + (_EV % "").replace('"a"', '"' + "x" * (2**20 + 1) + '"')
                    + "]}")
    with pytest.raises(TraceFormatError,
                       match=r"\$\.traceEvents\[1\]\.name: a string of more than 1,048,576 characters"):
        parse_path(path, ParseOptions(output_dir=tmp_path / "out"))
    path.write_text('{"traceEvents":[' + _EV % (',"args":{"Input Dims":[' + "1," * 2**20 + "1]}") + "]}")
    with pytest.raises(TraceFormatError, match=r"\$\.traceEvents\[0\]\.args\.Input Dims: "):
        parse_path(path, ParseOptions(output_dir=tmp_path / "out"))


def test_a_bug_on_one_input_of_a_directory_still_writes_the_others_and_exits_partial(tmp_path, monkeypatch,
                                                                                       capsys):
    from mlprof.cli.main import EXIT_PARTIAL, main
    from mlprof.parse import pipeline

    for rank in range(3):
        (tmp_path / f"rank{rank}.pt.trace.json").write_text('{"traceEvents":[' + _EV % "" + "]}")
    real = pipeline._parse_trace

    def buggy(item, options):
        if item.path.name == "rank1.pt.trace.json":
            raise IndexError("index 0 is out of bounds")
        return real(item, options)

    monkeypatch.setattr(pipeline, "_parse_trace", buggy)
    assert main(["parse", str(tmp_path), "--tables-only"]) == EXIT_PARTIAL
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "rank1.pt.trace.json: internal error: IndexError" in err
    assert (tmp_path / "rank0_mlprof_output" / "tables").is_dir()
    assert (tmp_path / "rank2_mlprof_output" / "tables").is_dir()
    assert not (tmp_path / "rank1_mlprof_output").exists()


def test_cluster_with_one_bad_rank_reports_it_and_exits_partial(tmp_path, capsys):
    from mlprof.cli.main import EXIT_PARTIAL, main

    for rank in range(2):
        (tmp_path / f"rank{rank}.pt.trace.json").write_text(
            '{"distributedInfo":{"rank":%d,"world_size":3},"traceEvents":[%s]}' % (rank, _EV % ""))
    (tmp_path / "rank2.pt.trace.json").write_text('{"traceEvents":[')
    assert main(["cluster", str(tmp_path), "--workers", "1"]) == EXIT_PARTIAL
    captured = capsys.readouterr()
    assert captured.err.count("\n") == 1 and "rank2.pt.trace.json" in captured.err
    assert "2 rank(s)" in captured.out


def test_full_disk_while_exporting_names_the_file_and_leaves_no_temporary(tmp_path, monkeypatch):
    from mlprof.errors import MlprofError
    from mlprof.export import ExportOptions, run_exports, trace_view

    trace = tmp_path / "t.pt.trace.json"
    trace.write_text('{"traceEvents":[' + _EV % "" + "]}")
    out = tmp_path / "out"
    parse_path(trace, ParseOptions(output_dir=out))

    def fail(store, tmp, base, step):
        tmp.write_text('{"traceEvents": [')
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(trace_view, "_write_events", fail)
    with pytest.raises(MlprofError, match=r"trace_view\.json: cannot write: No space left on device"):
        run_exports(out, ExportOptions())
    assert not [p for p in out.iterdir() if "tmp" in p.name]
    assert not (out / "trace_view.json").exists()


def test_gzip_bomb_is_refused_by_its_ratio_so_far_not_at_its_end(tmp_path):
    """Issue 30, item 15: the ratio was taken against the whole file, so a bomb was read to its end (a 1 GiB
    one: 11-40 s, 650 MB) and one followed by enough incompressible bytes was not refused at all. Here 64 MiB
    of spaces (1030x) come before a 1 MiB name of random hex: 200x overall, a valid trace."""
    import gzip
    import io

    from mlprof.parse.trace_blocks import gunzip_blocks

    event = (_EV % "").replace('"a"', '"' + os.urandom(2**19).hex() + '"')
    data = (gzip.compress(b'{"traceEvents":[' + b" " * 64 * 2**20, compresslevel=6)
            + gzip.compress((event + "]}").encode(), compresslevel=6))
    assert len(b" " * 64 * 2**20) < 1000 * len(data) / 3  # far from the cap overall
    text_bytes = 0
    with pytest.raises(TraceFormatError, match="expands beyond 1000x the compressed bytes read: a decompression "
                                               "bomb"):
        for piece, _ in gunzip_blocks("bomb.pt.trace.json.gz", io.BytesIO(data), len(data), 2**20):
            text_bytes += len(piece)
    assert text_bytes <= 16 * 2**20  # refused at its first 16 MiB of text, not at its 64th
    path = tmp_path / "bomb.pt.trace.json.gz"
    path.write_bytes(data)
    with pytest.raises(TraceFormatError, match="decompression bomb"):
        parse_path(path, ParseOptions(output_dir=tmp_path / "out"))
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("inputs", [1, 2])
def test_a_failure_keeps_its_own_exit_code_whatever_its_class_is_named(tmp_path, monkeypatch, capsys, inputs):
    # The CLI mapped a failure back to an error class by its name: a subclass (here of CaptureError) became
    # a plain MlprofError, exit 5 instead of 3. It now gets the exception itself.
    from mlprof.cli.main import main
    from mlprof.errors import CaptureError
    from mlprof.parse import pipeline

    class LinkRefused(CaptureError):
        pass

    for rank in range(inputs):
        (tmp_path / f"rank{rank}.pt.trace.json").write_text('{"traceEvents":[' + _EV % "" + "]}")

    def refused(item, options):
        raise LinkRefused(f"{item.path}: refused")

    monkeypatch.setattr(pipeline, "_parse_trace", refused)
    target = tmp_path / "rank0.pt.trace.json" if inputs == 1 else tmp_path
    assert main(["parse", str(target), "--tables-only"]) == 3
    assert "refused" in capsys.readouterr().err
