"""The reader by offsets (plain traces): its pieces, read and decoded by every
process, give exactly the whole-file reader's columns; whatever it cannot cut
or prove goes on to the block reader or the whole-file reader, never to a wrong
answer."""

from __future__ import annotations

import gzip
import json

import pytest

from mlprof.errors import TraceFormatError
from mlprof.parse import kineto_ranges
from mlprof.parse.kineto_stream import NotStreamable
from mlprof.parse.kineto import StringPool, _read, read_kineto
from tests.parse.test_streaming import _events, _same, _write, events_per_piece

_PIECE = 4096


@pytest.fixture
def small_pieces(monkeypatch):
    """Pieces of 4 KiB and probes of 512 bytes, so a trace of a few hundred events makes dozens of pieces."""
    monkeypatch.setattr(kineto_ranges, "_PIECE_BYTES", _PIECE)
    monkeypatch.setattr(kineto_ranges, "_PROBE_BYTES", 512)


@pytest.fixture
def pieces_seen(monkeypatch):
    """Event counts of the pieces decoded in this process (a worker's are decoded in its own)."""
    return events_per_piece(monkeypatch, kineto_ranges, "_decode_range")


def _bare(path, events, indent=None):
    path.write_text(json.dumps(events, indent=indent))
    return path


@pytest.mark.parametrize("layout", ["kineto", "one_line", "bare_list"])
@pytest.mark.parametrize("workers", ["1", "2"])
def test_pieces_read_by_offset_give_the_whole_file_readers_columns(tmp_path, small_pieces, pieces_seen,
                                                                  monkeypatch, layout, workers):
    monkeypatch.setenv("MLPROF_PARSE_WORKERS", workers)
    events = _events(600)
    if layout == "kineto":  # indented, baseTimeNanoseconds after the events
        path = _write(tmp_path / "t.json", events, base_first=False, indent=2)
    elif layout == "one_line":  # json.dumps: "}, {" between events
        path = _write(tmp_path / "t.json", events)
    else:
        path = _bare(tmp_path / "t.json", events, indent=1)
    pool_r, pool_w = StringPool(), StringPool()
    by_offsets = kineto_ranges.read_ranges(path, pool_r)
    _same(by_offsets, _read(path, pool_w, None), pool_r, pool_w)
    if workers == "1":  # every piece here: many, none larger than about a piece's text
        assert len(pieces_seen) > 15 and max(pieces_seen) <= 2 * _PIECE // 100


def test_a_large_file_is_cut_in_at_most_max_pieces(tmp_path, small_pieces, pieces_seen, monkeypatch):
    monkeypatch.setenv("MLPROF_PARSE_WORKERS", "1")
    monkeypatch.setattr(kineto_ranges, "_MAX_PIECES", 4)
    path = _write(tmp_path / "t.json", _events(600), indent=2)
    pool_r, pool_w = StringPool(), StringPool()
    _same(kineto_ranges.read_ranges(path, pool_r), _read(path, pool_w, None), pool_r, pool_w)
    assert 2 <= len(pieces_seen) <= 5


@pytest.mark.parametrize("tricky", ["name_ends_in_a_cut", "nested_objects_in_args", "another_first_key"])
def test_text_that_looks_like_a_cut_never_gives_wrong_columns(tmp_path, small_pieces, tricky):
    events = _events(400)
    if tricky == "name_ends_in_a_cut":  # '}, {"ph' inside a string, on one line
        for e in events[::9]:
            e["name"] = 'x}, {"ph": "X", "name": "y'
        path = _write(tmp_path / "t.json", events)
    elif tricky == "nested_objects_in_args":  # "},\n{" one level down, inside args
        for e in events[::5]:
            e.setdefault("args", {})["list"] = [{"a": 1}, {"b": 2}, {"c": [{"d": 3}, {"e": 4}]}]
        path = _write(tmp_path / "t.json", events, indent=2)
    else:  # one line, another key first: no cut the reader by offsets trusts
        path = tmp_path / "t.json"
        path.write_text(json.dumps({"traceEvents": [{"version": 1, **e} for e in events]}))
        with pytest.raises(NotStreamable):
            kineto_ranges.read_ranges(path, StringPool())
    pool_r, pool_w = StringPool(), StringPool()
    _same(read_kineto(path, pool_r), _read(path, pool_w, None), pool_r, pool_w)


def test_compressed_traces_are_left_to_the_block_reader(tmp_path):
    path = _write(tmp_path / "t.json.gz", _events(50), indent=2)
    assert gzip.decompress(path.read_bytes())
    with pytest.raises(NotStreamable):
        kineto_ranges.read_ranges(path, StringPool())


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_bad_event_in_any_piece_is_named_by_the_whole_file_reader(tmp_path, small_pieces, monkeypatch, workers):
    monkeypatch.setenv("MLPROF_PARSE_WORKERS", workers)
    for bad_at in (20, 250, 440):
        events = _events(400)
        events[bad_at]["ts"] = "later"
        path = _write(tmp_path / "t.json", events, indent=2)
        with pytest.raises(TraceFormatError, match=rf"\$\.traceEvents\[{bad_at}\]"):
            read_kineto(path, StringPool())


def test_the_last_event_and_the_keys_after_the_array_are_read(tmp_path, small_pieces):
    events = _events(300)
    events.append({"ph": "X", "cat": "cpu_op", "name": "last_one", "pid": 1, "tid": 7, "ts": 99999.0, "dur": 1.0})
    path = _write(tmp_path / "t.json", events, base_first=False, indent=2)
    pool = StringPool()
    cols = kineto_ranges.read_ranges(path, pool)
    assert cols.base_time_ns == 1700000000000000000 and cols.metadata["traceName"] == b'"t"'
    assert pool.values()[cols.host["name"][-1]] == "last_one"
