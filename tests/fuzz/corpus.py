"""Generates the malformed-input corpus: traces and captures, built here, never committed.

Each case is ``(name, build)`` where ``build(dir) -> Path`` writes the input
inside ``dir`` and returns the path to give the commands.
"""

from __future__ import annotations

import gzip
import json
import os
from collections.abc import Callable
from pathlib import Path

from shared_data import SHARED_ASCEND
from trace_events import BASE_NS

ASCEND_RANK0 = SHARED_ASCEND / "db" / "level1" / "rank0_ascend_pt"


def _event(**over) -> dict:
    ev = {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 10.0, "dur": 5.0,
          "args": {"External id": 1}}
    ev.update(over)
    return ev


GOOD_EVENTS = [
    _event(name="ProfilerStep#1", cat="user_annotation", ts=1.0, dur=100.0),
    _event(),
    _event(name="cudaLaunchKernel", cat="cuda_runtime", ts=11.0, dur=2.0, args={"correlation": 5}),
    _event(name="gemm", cat="kernel", pid=0, tid=7, ts=20.0, dur=3.0, args={"correlation": 5, "device": 0}),
    {"ph": "i", "s": "t", "name": "[memory]", "pid": 1, "tid": 1, "ts": 12.0, "cat": "cpu_instant_event",
     "args": {"Bytes": 16, "Total Allocated": 16, "Total Reserved": 32, "Addr": 1, "Device Type": 0, "Device Id": -1}},
    {"ph": "s", "id": 5, "pid": 1, "tid": 1, "ts": 11.0, "cat": "ac2g", "name": "ac2g"},
    {"ph": "f", "id": 5, "pid": 0, "tid": 7, "ts": 20.0, "cat": "ac2g", "name": "ac2g", "bp": "e"},
    {"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": {"name": "main"}},
    {"ph": "C", "name": "util", "pid": 0, "ts": 15.0, "args": {"value": 1.5}},
]


def good_trace_text(events: list | None = None, **top) -> bytes:
    doc = {"schemaVersion": 1, "baseTimeNanoseconds": BASE_NS, **top,
           "traceEvents": GOOD_EVENTS if events is None else events}
    return json.dumps(doc).encode()


def _file(name: str, data: bytes) -> Callable[[Path], Path]:
    def build(d: Path) -> Path:
        p = d / name
        p.write_bytes(data)
        return p
    return build


def _trace_cases() -> list[tuple[str, Callable[[Path], Path]]]:
    good = good_trace_text()
    cases: list[tuple[str, Callable[[Path], Path]]] = []
    # Truncations and byte damage of a good trace, plain and gzip.
    for cut in (1, 2, 10, 25, 50, 100, 200, 400, len(good) // 2, len(good) - 3, len(good) - 1):
        cases.append((f"truncated_{cut}", _file("t.pt.trace.json", good[:cut])))
    for cut in (5, 20, 60, 120):
        cases.append((f"gzip_truncated_{cut}", _file("t.pt.trace.json.gz", gzip.compress(good)[:cut])))
    for at in (0, 3, 17, 64, 128, 300, 511):
        damaged = bytearray(good)
        damaged[at % len(damaged)] = 0xFF
        cases.append((f"byte_ff_at_{at}", _file("t.pt.trace.json", bytes(damaged))))
    # Wrong types and hostile values in each field of an event.
    for field, values in {
        "ts": ['"10"', "null", "[]", "{}", "1e400", "-1e300", "true", "99999999999999999999999"],
        "dur": ['"5"', "null", "[]", "-1e300", "1e20", "false"],
        "pid": ["[]", "{}", "1.5", "99999999999999999999999"],
        "tid": ["[1]", "null"],
        "name": ["1", "null", "[]", '"\\ud800"'],
        "cat": ["1", "{}"],
        "ph": ["1", "null", '"Z"', '""'],
        "args": ["1", '"x"', "[]", '{"External id": "abc"}', '{"External id": 1e400}',
                 '{"correlation": 18446744073709551616}', '{"Input Dims": ' + "[" * 3000 + "]" * 3000 + "}"],
    }.items():
        for i, raw in enumerate(values):
            text = good.replace(b'"name": "aten::mm", "pid": 1, "tid": 1, "ts": 10.0, "dur": 5.0, "args": {"External id": 1}',
                                _field_sub(field, raw))
            cases.append((f"field_{field}_{i}", _file("t.pt.trace.json", text)))
    # Shapes of the document.
    for i, text in enumerate([b"", b"   \n", b"null", b"1", b'"trace"', b"[1, 2]", b"[null]", b"{}",
                              b'{"traceEvents": {}}', b'{"traceEvents": null}', b'{"traceEvents": [1]}',
                              b'{"traceEvents": [[]]}', b'{"traceEvents": []', b'{"traceEvents": [], "x": }',
                              b"\xef\xbb\xbf" + good, b'{"traceEvents": [], "baseTimeNanoseconds": -5}',
                              b'{"traceEvents": [], "baseTimeNanoseconds": "now"}',
                              b'{"traceEvents": [], "baseTimeNanoseconds": 99999999999999999999999}',
                              b'{"schema": "1.0.1", "nodes": [], "pid": 1}',
                              b"[" * 100000 + b"]" * 100000, b'{"traceEvents": [{"ph": "X"}]}',
                              b'{"traceEvents": [NaN]}', b'{"traceEvents": [{"ph": "X", "ts": NaN, "dur": 1}]}',
                              b"\x00" * 64, b'{"traceEvents": [' + b'{"ph":"X","cat":"cpu_op","name":"' +
                              b"x" * (2**20 + 5) + b'","pid":1,"tid":1,"ts":1,"dur":1}]}']):
        cases.append((f"doc_{i}", _file("t.pt.trace.json", text)))
    cases.append(("gzip_garbage", _file("t.pt.trace.json.gz", b"\x1f\x8b" + os.urandom(64))))
    cases.append(("gzip_of_garbage", _file("t.pt.trace.json.gz", gzip.compress(os.urandom(256)))))
    cases.append(("gzip_bomb", _file("t.pt.trace.json.gz",
                                     gzip.compress(b'{"traceEvents":[' + b" " * 3_000_000 + b"]}"))))
    cases.append(("events_missing_dur", _file("t.pt.trace.json", good_trace_text([{"ph": "X", "cat": "cpu_op",
                                                                                      "name": "a", "ts": 1}]))))
    cases.append(("fifo_trace", _fifo))
    # Issue 30: a bomb whose ratio passes the cap early but not over the whole file (random bytes follow);
    # a name that is a terminal escape sequence; an output directory planted as a symlink beside the trace.
    cases.append(("gzip_bomb_then_noise", _file("t.pt.trace.json.gz", gzip.compress(
        b'{"traceEvents":[' + b" " * 20 * 2**20) + gzip.compress(b'"' + os.urandom(2**17).hex().encode() + b'"]}'))))
    cases.append(("name_with_escapes", _file("t\x1b[2J\x1b]0;pwned\x07\x9b31m.pt.trace.json", b'{"traceEvents": [')))
    cases.append(("trace_output_symlink_out", _trace_output_planted))
    return cases


def _trace_output_planted(d: Path) -> Path:
    trace = _file("t.pt.trace.json", good_trace_text())(d)
    victim = d / "victim"
    victim.mkdir()
    (victim / "keep.txt").write_text("precious")
    (d / "t_mlprof_output").symlink_to(victim)
    return trace


def _field_sub(field: str, raw: str) -> bytes:
    base = {"name": '"aten::mm"', "pid": "1", "tid": "1", "ts": "10.0", "dur": "5.0", "args": '{"External id": 1}',
            "cat": '"cpu_op"', "ph": '"X"'}
    base[field] = raw
    # ph and cat come before name in the good text; replace them in place by re-adding.
    body = ", ".join(f'"{k}": {base[k]}' for k in ("name", "pid", "tid", "ts", "dur", "args"))
    if field in ("ph", "cat"):
        body += f', "{field}": {raw}'
    return body.encode()


def _fifo(d: Path) -> Path:
    p = d / "t.pt.trace.json"
    os.mkfifo(p)
    return p


def _capture(d: Path, info: dict | None = None, window: dict | None = None, files: dict | None = None,
             raw_info: bytes | None = None, trace: bytes | None = None) -> Path:
    root = d / "job_mlprof"
    wdir = root / "raw" / "window_0000"
    wdir.mkdir(parents=True)
    manifest = {"schema_version": 1, "kind": "mlprof.capture", "status": "finished", "worker_name": "w",
                "host": "h", "pid": 1, "rank": 0, "world_size": 1, "local_rank": 0, "versions": {}, "config": {},
                "clock": {"wall_ns": 0, "monotonic_ns": 0}, "created_wall_ns": BASE_NS,
                "windows": [{"index": 0, "dir": "raw/window_0000", "status": "complete"}], "error": None}
    manifest.update(info or {})
    (root / "profiler_info.json").write_bytes(raw_info if raw_info is not None else json.dumps(manifest).encode())
    (wdir / "kineto.pt.trace.json").write_bytes(good_trace_text() if trace is None else trace)
    listed = {"kineto": "kineto.pt.trace.json"}
    for name, data in (files or {}).items():
        (wdir / f"{name}.json").write_bytes(data)
        listed[name] = f"{name}.json"
    win = {"index": 0, "status": "complete", "files": listed}
    win.update(window or {})
    (wdir / "window.json").write_text(json.dumps(win))
    return root


def _capture_cases() -> list[tuple[str, Callable[[Path], Path]]]:
    cases: list[tuple[str, Callable[[Path], Path]]] = []
    for i, change in enumerate([{"schema_version": 99}, {"schema_version": "1"}, {"rank": "0"},
                                {"world_size": [2]}, {"pid": 2**70}, {"windows": "all"}, {"config": 3},
                                {"status": 5}, {"created_wall_ns": 1.5}]):
        cases.append((f"manifest_{i}", lambda d, c=change: _capture(d, info=c)))
    for i, raw in enumerate([b"", b"{", b"[]", b"null", b"\xff\xfe", b"[" * 100000]):
        cases.append((f"manifest_raw_{i}", lambda d, r=raw: _capture(d, raw_info=r)))
    for i, win in enumerate([{"status": "writing"}, {"files": "x"}, {"files": {"kineto": "../../etc/passwd"}},
                             {"files": {"kineto": "/etc/passwd"}}, {"files": {"kineto": 5}},
                             {"files": {"kineto": "nope.json"}}, {"files": {"steps": "steps.json"}}]):
        cases.append((f"window_{i}", lambda d, w=win: _capture(d, window=w)))
    for i, (name, data) in enumerate([("steps", b"{"), ("steps", b'[{"step": "1"}]'),
                                      ("steps", b'[{"step": 1, "start_ns": 99999999999999999999999, "end_ns": 1}]'),
                                      ("markers", b'{"marks": 5}'), ("gc", b'[{"start_ns": null}]'),
                                      ("gc", b""), ("markers", b"\xff"), ("steps", b"[" * 100000)]):
        cases.append((f"window_file_{i}", lambda d, n=name, x=data: _capture(d, files={n: x})))
    cases.append(("capture_bad_trace", lambda d: _capture(d, trace=b'{"traceEvents": [')))
    cases.append(("capture_trace_symlink_out", _capture_symlinked_trace))
    cases.append(("capture_trace_fifo", _capture_fifo_trace))
    cases.append(("capture_only_partial", _capture_only_partial))
    cases.append(("capture_output_symlink_out", _capture_output_planted))
    cases.append(("capture_window_symlink_out", _capture_window_linked_out))
    cases.append(("capture_raw_symlink_out", _capture_raw_linked_out))
    if ASCEND_RANK0.is_dir():
        cases.append(("ascend_db_hostile_folder", _ascend_db_hostile_folder))
    return cases


def _capture_output_planted(d: Path) -> Path:
    """mlprof_output planted as a symlink to a directory outside the capture (issue 30, item 3)."""
    root = _capture(d)
    victim = d / "victim"
    victim.mkdir()
    (victim / "keep.txt").write_text("precious")
    (root / "mlprof_output").symlink_to(victim)
    return root


def _capture_window_linked_out(d: Path) -> Path:
    root = _capture(d)
    window = root / "raw" / "window_0000"
    window.rename(d / "elsewhere")
    window.symlink_to(d / "elsewhere")
    return root


def _capture_raw_linked_out(d: Path) -> Path:
    root = _capture(d)
    (root / "raw").rename(d / "elsewhere")
    (root / "raw").symlink_to(d / "elsewhere")
    return root


def _ascend_db_hostile_folder(d: Path) -> Path:
    """The real torch_npu db (WAL mode) under a folder name that cuts a raw SQLite URI (issue 30, item 5):
    reading it must add no -shm/-wal file (the test checks the input is unchanged)."""
    import shutil

    rank = d / "run #1?mode=rwc" / ASCEND_RANK0.name
    shutil.copytree(ASCEND_RANK0, rank)
    return rank


def _capture_symlinked_trace(d: Path) -> Path:
    root = _capture(d)
    trace = root / "raw" / "window_0000" / "kineto.pt.trace.json"
    outside = d / "outside.json"
    outside.write_bytes(good_trace_text())
    trace.unlink()
    trace.symlink_to(outside)
    return root


def _capture_fifo_trace(d: Path) -> Path:
    root = _capture(d)
    trace = root / "raw" / "window_0000" / "kineto.pt.trace.json"
    trace.unlink()
    os.mkfifo(trace)
    return root


def _capture_only_partial(d: Path) -> Path:
    root = _capture(d)
    (root / "raw" / "window_0000").rename(root / "raw" / ".partial_window_0000")
    return root


def _events_with(index: int, **change) -> list[dict]:
    """GOOD_EVENTS with event ``index`` changed (a value of None drops the key)."""
    events = [dict(e) for e in GOOD_EVENTS]
    events[index].update(change)
    events[index] = {k: v for k, v in events[index].items() if v is not None}
    return events


def _unreadable_dir(d: Path) -> Path:
    """A folder holding a good trace that this user may not list or enter (root reads it anyway,
    unless its capabilities are dropped: tests/cli/test_unreadable_inputs.py)."""
    folder = d / "closed"
    folder.mkdir()
    (folder / "t.pt.trace.json").write_bytes(good_trace_text())
    folder.chmod(0)
    return folder


def _malformed_event_cases() -> list[tuple[str, Callable[[Path], Path]]]:
    """Issue 30, items 8 and 9: each was an internal error or a silent exit 0."""
    all_negative = [dict(e, dur=-e["dur"]) if "dur" in e else e for e in GOOD_EVENTS]
    return [
        ("step_number_past_64_bits", _file("t.pt.trace.json", good_trace_text(
            _events_with(0, name="ProfilerStep#99999999999999999999")))),
        ("all_durations_negative", _file("t.pt.trace.json", good_trace_text(all_negative))),
        ("name_of_242_characters", _file("n" * 242, good_trace_text())),
        ("cpu_op_without_ts", _file("t.pt.trace.json", good_trace_text(_events_with(1, ts=None)))),
        ("cpu_op_without_name", _file("t.pt.trace.json", good_trace_text(_events_with(1, name=None)))),
        ("event_without_ph", _file("t.pt.trace.json", good_trace_text(_events_with(1, ph=None)))),
        ("kernel_without_name", _file("t.pt.trace.json", good_trace_text(_events_with(3, name=None)))),
        ("cat_of_10_mib", _file("t.pt.trace.json", good_trace_text(_events_with(1, cat="c" * (10 << 20))))),
        ("unreadable_dir", _unreadable_dir),
    ]


def _ascend_db(sql: str) -> Callable[[Path], Path]:
    """A copy of the real torch_npu SQLite export (rank 0) with ``sql`` applied."""
    def build(d: Path) -> Path:
        import shutil
        import sqlite3

        from shared_data import SHARED_ASCEND

        rank = shutil.copytree(SHARED_ASCEND / "db" / "level1" / "rank0_ascend_pt", d / "rank0_ascend_pt")
        db = next((rank / "ASCEND_PROFILER_OUTPUT").glob("ascend_pytorch_profiler_*.db"))
        con = sqlite3.connect(db)
        # Not WAL: reading a WAL db is item 5's matter; these cases are about its content.
        con.executescript("PRAGMA journal_mode=DELETE;" + sql)
        con.commit()
        con.close()
        return rank
    return build


def _ascend_text_big_name(d: Path) -> Path:
    import shutil

    from shared_data import SHARED_ASCEND

    rank = shutil.copytree(SHARED_ASCEND / "text" / "level1" / "rank0_ascend_pt", d / "rank0_ascend_pt")
    view = rank / "ASCEND_PROFILER_OUTPUT" / "trace_view.json"
    events = json.loads(view.read_text())
    events = events["traceEvents"] if isinstance(events, dict) else events
    next(e for e in events if e.get("ph") == "X")["name"] = "x" * 5_000_000
    view.write_text(json.dumps(events))
    return rank


def _ascend_cases() -> list[tuple[str, Callable[[Path], Path]]]:
    from shared_data import SHARED_ASCEND

    if not SHARED_ASCEND.is_dir():  # the real data is not here: these cases need it
        return []
    first = "WHERE rowid = (SELECT min(rowid) FROM {})"
    return [
        ("ascend_db_null_strings", _ascend_db("UPDATE STRING_IDS SET value = NULL;")),
        ("ascend_db_null_name_id", _ascend_db("UPDATE PYTORCH_API SET name = NULL " + first.format("PYTORCH_API"))),
        ("ascend_db_text_start_ns", _ascend_db("UPDATE PYTORCH_API SET startNs = 'abc' "
                                               + first.format("PYTORCH_API"))),
        ("ascend_db_null_start_ns", _ascend_db("UPDATE PYTORCH_API SET startNs = NULL " + first.format("PYTORCH_API"))),
        ("ascend_db_task_text_start_ns", _ascend_db("UPDATE TASK SET startNs = 'abc';")),
        ("ascend_db_string_of_5_mb", _ascend_db(
            "UPDATE STRING_IDS SET value = printf('%.*c', 5000000, 'x') WHERE id = (SELECT name FROM PYTORCH_API "
            "LIMIT 1);")),
        ("ascend_text_string_of_5_mb", _ascend_text_big_name),
    ]


def cases() -> list[tuple[str, Callable[[Path], Path]]]:
    return _trace_cases() + _capture_cases() + _malformed_event_cases() + _ascend_cases()
