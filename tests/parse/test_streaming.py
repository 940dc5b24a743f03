"""The streaming Kineto reader: a trace read in small blocks gives exactly the
columns of the whole-file reader, holds one block's events at a time, and
leaves every error to the whole-file reader's exact message."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest

from mlprof.errors import TraceFormatError
from mlprof.parse import kineto_cuts, kineto_ranges, kineto_stream, trace_blocks
from mlprof.parse.kineto import StringPool, _read, read_kineto

_BLOCK = 4096


@pytest.fixture
def small_blocks(monkeypatch):
    """Blocks of 4 KiB, so a trace of a few hundred events spans many of them; pieces decoded in
    parts of 1,000 bytes, so parts cut inside names holding "}, {" too."""
    monkeypatch.setattr(trace_blocks, "_MIN_BLOCK", _BLOCK)
    monkeypatch.setattr(trace_blocks, "_MAX_BLOCK", _BLOCK)
    monkeypatch.setattr(kineto_stream, "_LOCAL_PIECE_BYTES", 1000)
    # Plain traces are first read by offsets (kineto_ranges): pieces of a block's size there too.
    monkeypatch.setattr(kineto_ranges, "_PIECE_BYTES", _BLOCK)
    monkeypatch.setattr(kineto_ranges, "_PROBE_BYTES", 512)


def _events(n: int) -> list[dict]:
    out = [{"ph": "M", "name": "thread_name", "pid": 1, "tid": 7, "args": {"name": "main"}}]
    for i in range(n):
        step = i // 50
        if i % 50 == 0:
            out.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step}", "pid": 1, "tid": 7,
                        "ts": step * 1000.0, "dur": 999.0})
        # Names holding "}, {" and "}," test cuts that fall inside a string.
        name = "aten::add" if i % 7 else 'weird"}, {"name": "x'
        out.append({"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 7, "ts": step * 1000.0 + i % 50 * 10 + 1,
                    "dur": 5.5, "args": {"External id": i, "Input Dims": [[i % 3, 4]], "Input type": ["float"]}})
        if i % 25 == 0:
            out.append({"ph": "s", "id": i, "cat": "fwdbwd", "name": "fwdbwd", "pid": 1, "tid": 7,
                        "ts": step * 1000.0 + 2})
            out.append({"ph": "f", "id": i, "bp": "e", "cat": "fwdbwd", "name": "fwdbwd", "pid": 1, "tid": 7,
                        "ts": step * 1000.0 + 3})
    out.append({"ph": "C", "name": "mem", "pid": 1, "ts": 5.0, "args": {"bytes": 10, "other": 2.5}})
    return out


def _write(path, events, base_first=True, indent=None):
    body = json.dumps(events, indent=indent)
    head = '{"schemaVersion": 1, ' + ('"baseTimeNanoseconds": 1700000000000000000, ' if base_first else "")
    tail = "" if base_first else ', "traceName": "t", "baseTimeNanoseconds": 1700000000000000000'
    text = (head + '"traceEvents": ' + body + tail + "}").encode()
    path.write_bytes(gzip.compress(text) if path.name.endswith(".gz") else text)
    return path


def events_per_piece(monkeypatch, module, name: str) -> list[int]:
    """The event counts of the pieces ``module.name`` decodes in this process, in order."""
    seen = []
    real = getattr(module, name)

    def spy(*args, **kwargs):
        got = real(*args, **kwargs)
        seen.append(got["events"])
        return got

    monkeypatch.setattr(module, name, spy)
    return seen


def _same(a, b, pool_a, pool_b) -> None:
    va = np.array(pool_a.values() + [None], dtype=object)
    vb = np.array(pool_b.values() + [None], dtype=object)
    assert (a.event_count, a.base_time_ns, a.metadata, a.threads, dict(a.unknown)) == \
           (b.event_count, b.base_time_ns, b.metadata, b.threads, dict(b.unknown))
    for kind in kineto_stream.ACCUMULATED:
        x, y = getattr(a, kind), getattr(b, kind)
        assert set(x) == set(y), kind
        for key in x:
            xs, ys = x[key], y[key]
            if xs.dtype == np.int32:  # pool codes: compare the strings
                xs, ys = va[xs], vb[ys]
            assert xs.tolist() == ys.tolist() or np.array_equal(xs, ys, equal_nan=True), (kind, key)


@pytest.mark.parametrize("name, base_first, indent, workers", [
    ("t.json", True, None, "1"),
    ("t.json", False, 2, "1"),  # Kineto's layout: baseTimeNanoseconds after the events
    ("t.json.gz", False, None, "1"),
    ("t.json", True, 2, "2"),  # pieces handed to a forked worker
])
def test_trace_read_in_small_blocks_gives_the_whole_file_readers_columns(
        tmp_path, small_blocks, monkeypatch, name, base_first, indent, workers):
    monkeypatch.setenv("MLPROF_PARSE_WORKERS", workers)
    path = _write(tmp_path / name, _events(600), base_first, indent)
    text = gzip.decompress(path.read_bytes()) if name.endswith(".gz") else path.read_bytes()
    assert len(text) > 20 * _BLOCK
    seen = events_per_piece(monkeypatch, kineto_stream, "decode_piece")
    pool_s, pool_w = StringPool(), StringPool()
    streamed = kineto_stream.read_stream(path, pool_s, None, None)
    whole = _read(path, pool_w, None)
    _same(streamed, whole, pool_s, pool_w)
    # Bounded: no piece holds more events than one block (plus the events
    # cut from the block before) can hold; the events are ~150 bytes each.
    if workers == "1":
        assert len(seen) > 10 and max(seen) <= 2 * _BLOCK // 100


def test_progress_reports_bytes_read_of_the_file_size(tmp_path, small_blocks):
    path = _write(tmp_path / "t.json", _events(300))
    calls = []
    read_kineto(path, StringPool(), lambda done, total: calls.append((done, total)))
    size = path.stat().st_size
    assert calls[-1] == (size, size) and len(calls) > 5
    assert all(t == size for _, t in calls) and [d for d, _ in calls] == sorted(d for d, _ in calls)


def test_bad_event_deep_in_a_streamed_trace_is_named_as_by_the_whole_file_reader(tmp_path, small_blocks):
    events = _events(400)
    events[300]["dur"] = "soon"
    path = _write(tmp_path / "t.json", events)
    with pytest.raises(TraceFormatError, match=r"\$\.traceEvents\[300\]"):
        read_kineto(path, StringPool())


@pytest.mark.parametrize("cut", [-3, -40, 5000])
def test_truncated_streamed_trace_is_refused_as_truncated(tmp_path, small_blocks, cut):
    path = _write(tmp_path / "t.json", _events(400))
    data = path.read_bytes()
    path.write_bytes(data[:cut])
    with pytest.raises(TraceFormatError, match="truncated|malformed"):
        read_kineto(path, StringPool())


def test_trailing_comma_in_the_event_array_is_refused(tmp_path, small_blocks):
    path = tmp_path / "t.json"
    text = json.dumps({"traceEvents": _events(200)})
    path.write_text(text[:-2] + ",]}")
    with pytest.raises(TraceFormatError):
        read_kineto(path, StringPool())


def test_a_cut_inside_a_string_is_never_taken():
    # The last "}," lies inside the name string: decoding up to it fails, and
    # the cut falls back to the one after the first event.
    buf = b'{"ph": "X"}, {"ph": "X", "name": "a}, {\\"b}, c'
    rest_at, raws = kineto_cuts.proven_cut(buf)
    assert [bytes(r) for r in raws] == [b'{"ph": "X"}'] and buf[rest_at:].startswith(b' {"ph"')
    assert kineto_cuts.proven_cut(b'{"ph": "X", "name": "a}, b') is None


@pytest.mark.parametrize("tricky", [False, True])
def test_pieces_a_worker_proves_give_the_whole_file_readers_columns(tmp_path, small_blocks, monkeypatch, tricky):
    """Gzip text handed to a worker is cut at a trusted gap without a decode here; a gap inside a
    string ('}, {"ph' in a name) fails the worker's decode, and the file is still read right."""
    monkeypatch.setenv("MLPROF_PARSE_WORKERS", "2")
    events = _events(600)
    if tricky:
        for e in events[::9]:
            e["name"] = 'x}, {"ph": "X", "name": "y'
    path = _write(tmp_path / "t.json.gz", events)
    pool_r, pool_w = StringPool(), StringPool()
    _same(read_kineto(path, pool_r), _read(path, pool_w, None), pool_r, pool_w)


@pytest.mark.parametrize("name, base_first", [("t.json", True), ("t.json", False), ("t.json.gz", True),
                                              ("t.json.gz", False)])
def test_times_a_double_cannot_hold_are_read_to_the_ns_after_a_base_too(tmp_path, small_blocks, name, base_first):
    """Kineto's ts after baseTimeNanoseconds run to weeks (55 days on a trace of this machine); past
    2**43 µs (101.8 days) a double misses the ns, and the text is read exactly, by every reader,
    wherever the base is written."""
    from decimal import Decimal

    ts_texts = [f"{9_000_000_000_000 + i * 37}.{i * 7 % 1000:03d}" for i in range(300)]  # from 104 days on
    events = [{"ph": "X", "cat": "cpu_op", "name": f"op{i % 5}", "pid": 1, "tid": 7, "ts": f"@{i}@", "dur": 1.001}
              for i in range(len(ts_texts))]
    path = _write(tmp_path / "plain.json", events, base_first)
    text = path.read_text()
    for i, ts in enumerate(ts_texts):  # Kineto's own text: three decimals, zeros kept
        text = text.replace(f'"@{i}@"', ts)
    path.unlink()
    path = tmp_path / name
    path.write_bytes(gzip.compress(text.encode()) if name.endswith(".gz") else text.encode())
    expected = [1_700_000_000_000_000_000 + int(Decimal(t) * 1000) for t in ts_texts]
    floats = [1_700_000_000_000_000_000 + round(float(t) * 1000) for t in ts_texts]
    assert floats != expected  # a double's ns are wrong here
    for read in (read_kineto, kineto_stream.read_stream, lambda path, pool, *_: _read(path, pool, None)):
        cols = read(path, StringPool(), None, None)
        assert cols.host["start_ns"].tolist() == expected, read
        assert cols.host["dur_ns"].tolist() == [1001] * len(events)


def _uptime_trace(path, first_us: int, n: int = 300):
    """A plain trace of ``n`` ops whose ts texts start at ``first_us`` µs after the base, three decimals."""
    texts = [f"{first_us + i * 37}.{i * 7 % 1000:03d}" for i in range(n)]
    events = [{"ph": "X", "cat": "cpu_op", "name": f"op{i % 5}", "pid": 1, "tid": 7, "ts": f"@{i}@", "dur": 1.001}
              for i in range(n)]
    text = json.dumps({"baseTimeNanoseconds": 1_700_000_000_000_000_000, "traceEvents": events})
    for i, ts in enumerate(texts):
        text = text.replace(f'"@{i}@"', ts)
    path.write_text(text)
    return path


@pytest.mark.parametrize("first_us", [9_000_000_000_000, 4_000_000_000_000])
def test_parts_decoded_with_ts_as_text_give_the_columns_of_the_double_and_its_reread(
        tmp_path, small_blocks, monkeypatch, first_us):
    """Once a part's times needed their text, the next parts are decoded with ts as text in one go;
    the columns are those of decoding ts as doubles and reading the text again, past 2**43 µs and
    below it, and the choice follows the last part."""
    path = _uptime_trace(tmp_path / "t.json", first_us)
    chosen = []
    real_decoder = kineto_stream._TsAsText.decoder

    def spy(self):
        chosen.append(self.wanted)
        return real_decoder(self)

    monkeypatch.setattr(kineto_stream._TsAsText, "decoder", spy)
    got = {}
    for start_as_text in (False, True):
        monkeypatch.setattr(kineto_stream._TS_AS_TEXT, "wanted", start_as_text)
        chosen.clear()
        pool = StringPool()
        got[start_as_text] = (read_kineto(path, pool, None, None), pool)
        assert len(chosen) > 5 and chosen[0] is start_as_text
        # Past 2**43 µs every part after the first is read as text; below it, none is.
        assert set(chosen[1:]) == {first_us >= 2**43}
    _same(got[False][0], got[True][0], got[False][1], got[True][1])
    whole_pool = StringPool()
    _same(got[True][0], _read(path, whole_pool, None), got[True][1], whole_pool)


def test_a_bad_ts_read_as_text_is_named_as_the_whole_file_reader_names_it(tmp_path, small_blocks, monkeypatch):
    path = _uptime_trace(tmp_path / "t.json", 9_000_000_000_000)
    path.write_text(path.read_text().replace("9000000000037.007", '"soon"'))
    messages = []
    for as_text in (False, True):
        monkeypatch.setattr(kineto_stream._TS_AS_TEXT, "wanted", as_text)
        with pytest.raises(TraceFormatError) as err:
            read_kineto(path, StringPool(), None, None)
        messages.append(str(err.value))
    assert messages[0] == messages[1] and "ts" in messages[0]
