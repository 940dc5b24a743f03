"""Events that lack what every reader needs (issue 30, item 9): no ``ph``, no ``name`` on an
event the tables keep, no ``ts`` on anything but a metadata event, a name or category past
1 MiB. Each is refused (exit 4) with its JSON path by every reader (whole file, by offsets,
in blocks, with ts read as text), never read as an op named "" or a time of 0 (a cpu_op
without ts made ``mlprof query`` report a 57-day span)."""

from __future__ import annotations

import gzip
import re
import json

import pytest

from mlprof.errors import TraceFormatError
from mlprof.parse import kineto_stream
from mlprof.parse.kineto import StringPool, _read, read_kineto
from tests.parse.test_ranges import small_pieces  # noqa: F401 (fixture)
from tests.parse.test_streaming import _events, _write, small_blocks  # noqa: F401 (fixture)

_BAD_AT = 300


def _drop(key):
    def change(ev):
        del ev[key]
    return change


def _set(key, value):
    def change(ev):
        ev[key] = value
    return change


DEFECTS = {
    "no_ts": (_drop("ts"), r"\.ts: missing"),
    "no_name": (_drop("name"), r"\.name: missing"),
    "no_ph": (_drop("ph"), r"\.ph: missing"),
    "empty_ph": (_set("ph", ""), r"\.ph: empty"),
    "cat_10_mib": (_set("cat", "c" * (10 << 20)), r"\.cat: a string of more than 1,048,576 characters"),
    "unkept_name_2_mib": (lambda ev: ev.update(cat="not_modelled", name="n" * (2 << 20)),
                          r"\.name: a string of more than 1,048,576 characters"),
}


def _bad_trace(path, defect: str, uptime: bool = False):
    events = _events(400)
    assert events[_BAD_AT]["cat"] == "cpu_op"
    if uptime:  # times past 2**43 µs: read again from their text (or decoded as text)
        for ev in events:
            if "ts" in ev:
                ev["ts"] += 9_000_000_000_000
    DEFECTS[defect][0](events[_BAD_AT])
    return _write(path, events, indent=2)


def _refused(path, defect):
    with pytest.raises(TraceFormatError) as err:
        read_kineto(path, StringPool())
    message = str(err.value)
    assert f"$.traceEvents[{_BAD_AT}]" in message, message
    assert re.search(DEFECTS[defect][1], message), message
    assert str(path) in message and "\n" not in message
    return message


@pytest.mark.parametrize("defect", list(DEFECTS))
def test_the_whole_file_reader_names_the_event(tmp_path, defect):
    path = _bad_trace(tmp_path / "t.json", defect)
    with pytest.raises(TraceFormatError, match=rf"\$\.traceEvents\[{_BAD_AT}\]"):
        _read(path, StringPool(), None)


@pytest.mark.parametrize("workers", ["1", "2"])
@pytest.mark.parametrize("defect", list(DEFECTS))
def test_read_by_offsets_it_is_named_as_the_whole_file_reader_names_it(tmp_path, small_pieces, monkeypatch,
                                                                       defect, workers):
    monkeypatch.setenv("MLPROF_PARSE_WORKERS", workers)
    _refused(_bad_trace(tmp_path / "t.json", defect), defect)


@pytest.mark.parametrize("defect", list(DEFECTS))
def test_read_in_blocks_it_is_named_as_the_whole_file_reader_names_it(tmp_path, small_blocks, monkeypatch, defect):
    monkeypatch.setenv("MLPROF_PARSE_WORKERS", "2")
    path = _bad_trace(tmp_path / "t.json", defect)
    gz = tmp_path / "t.json.gz"
    gz.write_bytes(gzip.compress(path.read_bytes()))
    _refused(gz, defect)


@pytest.mark.parametrize("as_text", [False, True])
@pytest.mark.parametrize("defect", ["no_ts", "no_name"])
def test_with_times_read_from_their_text_it_is_named_too(tmp_path, small_blocks, monkeypatch, defect, as_text):
    monkeypatch.setattr(kineto_stream._TS_AS_TEXT, "wanted", as_text)
    _refused(_bad_trace(tmp_path / "t.json", defect, uptime=True), defect)


def test_what_real_traces_leave_out_is_still_read(tmp_path):
    """Metadata events without ts and flow events without a name, as Kineto and others write them."""
    events = [{"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "python"}},
              {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 10.0, "dur": 5.0},
              {"ph": "s", "id": 1, "cat": "fwdbwd", "pid": 1, "tid": 1, "ts": 11.0},
              {"ph": "f", "id": 1, "bp": "e", "cat": "fwdbwd", "pid": 1, "tid": 1, "ts": 12.0},
              {"ph": "X", "cat": "not_modelled", "pid": 1, "tid": 1, "ts": 13.0, "dur": 1.0}]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    cols = read_kineto(path, StringPool())
    assert len(cols.host["name"]) == 1 and len(cols.flows["ph"]) == 2 and cols.threads


@pytest.mark.parametrize("drop, says", [("ts", r"\.ts: missing"), ("ph", r"`ph`"), ("dur", r"\.dur: missing")])
def test_the_ascend_text_reader_refuses_them_too(tmp_path, drop, says):
    """torch_npu's trace_view.json (read by its own reader): an event without ts was read as 0."""
    import shutil

    from mlprof.parse import ParseOptions, parse_path
    from shared_data import SHARED_ASCEND

    if not SHARED_ASCEND.is_dir():
        pytest.skip(f"shared Ascend data not found at {SHARED_ASCEND}")
    rank = shutil.copytree(SHARED_ASCEND / "text" / "level1" / "rank0_ascend_pt", tmp_path / "rank0_ascend_pt")
    view = rank / "ASCEND_PROFILER_OUTPUT" / "trace_view.json"
    events = json.loads(view.read_text())
    del next(e for e in events if e.get("ph") == "X")[drop]
    view.write_text(json.dumps(events))
    with pytest.raises(TraceFormatError, match=says) as err:
        parse_path(rank, ParseOptions(output_dir=tmp_path / "out"))
    assert str(view) in str(err.value) and "\n" not in str(err.value)


def test_the_event_named_is_the_bad_one_not_an_earlier_event_the_tables_skip(tmp_path):
    """An event of a phase mlprof does not model may lack ts (nothing reads it): the error names
    the event that broke the read."""
    events = _events(400)
    events.insert(10, {"ph": "Z", "name": "future", "pid": 1, "tid": 7})
    del events[_BAD_AT]["ts"]
    path = _write(tmp_path / "t.json", events)
    with pytest.raises(TraceFormatError, match=rf"\$\.traceEvents\[{_BAD_AT}\]\.ts: missing"):
        _read(path, StringPool(), None)
