"""Paths another user (or the writer of an input) planted: mlprof never writes through them, never changes
the mode of a directory it did not make, and never prints a name's control characters raw (issue 30,
items 2, 3, 6 and the output lock of 12). Every case runs the real CLI in a subprocess."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import make_capture, write_trace
from .test_golden import EVENTS
from tree_state import snapshot

MLPROF = [sys.executable, "-m", "mlprof"]
_EV = {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 10.0, "dur": 5.0}


def mlprof(*args: str, **kw) -> subprocess.CompletedProcess:
    env = {**os.environ, "MLPROF_PARSE_WORKERS": "1", **kw.pop("env", {})}
    return subprocess.run([*MLPROF, *args], capture_output=True, text=True, timeout=300, env=env, **kw)


@pytest.mark.parametrize("command", ["parse", "export"])
def test_an_existing_output_directory_keeps_its_mode(tmp_path, command):
    """Item 2: a sticky 1777 --output lost its mode (chmod 0750) to every parse."""
    trace = write_trace(tmp_path / "t.pt.trace.json", [_EV])
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o1777)
    result = mlprof(command, str(trace), "--output", str(shared))
    assert result.returncode == 0, result.stderr
    assert any(shared.iterdir())
    assert stat.S_IMODE(os.stat(shared).st_mode) == 0o1777
    # One mlprof makes is private, whatever the umask.
    made = tmp_path / "made" / "out"
    result = mlprof("parse", str(trace), "--output", str(made))
    assert result.returncode == 0, result.stderr
    assert stat.S_IMODE(os.stat(made).st_mode) == 0o750


def test_mlprof_run_keeps_the_mode_of_an_existing_output(tmp_path):
    pytest.importorskip("torch")
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o1777)
    result = mlprof("run", "--output", str(shared), "--no-parse", "--", sys.executable, "-c", "pass",
                    env={"MLPROF_LOCK_DIR": str(tmp_path / "locks")})
    assert result.returncode == 0, result.stderr
    assert stat.S_IMODE(os.stat(shared).st_mode) == 0o1777


def _capture(tmp_path: Path) -> Path:
    return make_capture(tmp_path / "cap_mlprof", {0: {"events": EVENTS}})


@pytest.mark.parametrize("command", [["parse"], ["query"], ["export"], ["advise"]])
def test_a_planted_output_symlink_in_a_capture_is_refused_and_its_target_untouched(tmp_path, command):
    """Item 3: <capture>/mlprof_output as a symlink: every command wrote through it and chmodded its target."""
    capture = _capture(tmp_path)
    victim = tmp_path / "victim"
    victim.mkdir()
    os.chmod(victim, 0o755)
    (victim / "keep.txt").write_text("precious")
    (capture / "mlprof_output").symlink_to(victim)
    before = snapshot(victim)
    result = mlprof(*command, str(capture))
    assert result.returncode == 3, result.stderr
    assert result.stderr.count("\n") == 1
    assert "mlprof_output: the output directory is a symlink" in result.stderr
    assert snapshot(victim) == before and stat.S_IMODE(os.stat(victim).st_mode) == 0o755


def test_a_planted_output_symlink_beside_a_trace_is_refused(tmp_path):
    trace = write_trace(tmp_path / "rank0.pt.trace.json", [_EV])
    victim = tmp_path / "victim"
    victim.mkdir()
    (tmp_path / "rank0_mlprof_output").symlink_to(victim)
    result = mlprof("parse", str(trace))
    assert result.returncode == 3 and "rank0_mlprof_output: the output directory is a symlink" in result.stderr
    assert list(victim.iterdir()) == []
    # The user's own choice of --output may be a link: that one is followed.
    result = mlprof("parse", str(trace), "--output", str(tmp_path / "rank0_mlprof_output"))
    assert result.returncode == 0, result.stderr
    assert (victim / "tables").is_dir()


def test_a_planted_window_cache_symlink_is_refused(tmp_path):
    capture = _capture(tmp_path)
    victim = tmp_path / "victim"
    victim.mkdir()
    (capture / "mlprof_output").mkdir()
    (capture / "mlprof_output" / "windows").symlink_to(victim)
    result = mlprof("parse", str(capture))
    assert result.returncode == 3 and "windows: the window cache directory is a symlink" in result.stderr
    assert list(victim.iterdir()) == []


def test_a_window_directory_linked_out_of_the_capture_is_refused(tmp_path):
    """Item 3: raw/window_0001 -> a window elsewhere was read without complaint."""
    capture = make_capture(tmp_path / "cap_mlprof", {0: {"events": EVENTS}})
    elsewhere = make_capture(tmp_path / "other_mlprof", {1: {"events": EVENTS}})
    (capture / "raw" / "window_0001").symlink_to(elsewhere / "raw" / "window_0001")
    result = mlprof("parse", str(capture), "--json")
    assert result.returncode == 0, result.stderr
    assert '"windows": [\n      0\n    ]' in result.stdout
    assert "window_0001: a symlink; refusing to read it as a window" in result.stdout
    (capture / "raw" / "window_0000").rename(tmp_path / "moved")
    (capture / "raw" / "window_0000").symlink_to(tmp_path / "moved")
    result = mlprof("parse", str(capture))
    assert result.returncode == 3 and "no complete window to parse" in result.stderr
    # raw/ itself linked out of the capture.
    capture2 = tmp_path / "cap2_mlprof"
    capture2.mkdir()
    (capture2 / "profiler_info.json").write_bytes((elsewhere / "profiler_info.json").read_bytes())
    (capture2 / "raw").symlink_to(elsewhere / "raw")
    result = mlprof("parse", str(capture2))
    assert result.returncode == 3 and "raw: a symlink; refusing to read it" in result.stderr


def test_a_planted_lock_symlink_in_the_output_is_refused_and_no_lock_file_stays(tmp_path):
    trace = write_trace(tmp_path / "t.pt.trace.json", [_EV])
    out = tmp_path / "out"
    result = mlprof("parse", str(trace), "--output", str(out), "--tables-only")
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in out.iterdir()) == ["parse_info.json", "tables"]  # item 12: no empty .lock
    victim = tmp_path / "victim.txt"
    (out / ".lock").symlink_to(victim)
    result = mlprof("parse", str(trace), "--output", str(out), "--tables-only")
    assert result.returncode == 5 and ".lock: cannot open the output lock: a symlink" in result.stderr
    assert not victim.exists()


def test_control_characters_in_file_names_are_escaped_in_messages(tmp_path):
    """Item 6: an ANSI escape sequence in a file name reached the terminal raw."""
    folder = tmp_path / "a\x1b[31mred\x1b]0;title\x07\nx"
    folder.mkdir()
    trace = folder / "t\x9b2J.pt.trace.json"
    trace.write_text('{"traceEvents": [')
    result = mlprof("parse", str(trace))
    assert result.returncode == 4
    assert "\x1b" not in result.stderr and "\x07" not in result.stderr and "\x9b" not in result.stderr
    assert result.stderr.count("\n") == 1
    assert "a\\x1b[31mred\\x1b]0;title\\x07\\x0ax" in result.stderr and "t\\x9b2J.pt.trace.json" in result.stderr
    # Undecodable bytes of a name: escaped, not an internal error on a strict stdout.
    bad = os.fsencode(tmp_path) + b"/r\xff.pt.trace.json"
    with open(bad, "wb") as fh:
        fh.write(b'{"traceEvents": [')
    result = mlprof("parse", os.fsdecode(bad), env={"PYTHONIOENCODING": "utf-8:strict"})
    assert result.returncode == 4 and "r\\xff.pt.trace.json" in result.stderr, result.stderr


def _hold_lock(out: str, name: str, log: str, ready, hold_s: float) -> None:
    import time

    from mlprof.capture.files import output_lock

    with output_lock(Path(out)):
        with open(log, "a") as fh:
            fh.write(f"{name} in\n")
        if ready is not None:
            ready.set()
        time.sleep(hold_s)
        with open(log, "a") as fh:
            fh.write(f"{name} out\n")


def test_the_removed_lock_file_still_excludes_parses_that_waited_on_it(tmp_path):
    """Item 12: .lock is removed on release. b waits on a's file; once a removes it and b is in, c finds no
    file at the name and makes a new one: b must have moved to that name too, or b and c run side by side."""
    import multiprocessing

    ctx = multiprocessing.get_context("fork")
    out, log = tmp_path / "out", tmp_path / "log"
    out.mkdir()
    log.write_text("")
    a_in, b_in = ctx.Event(), ctx.Event()
    a = ctx.Process(target=_hold_lock, args=(str(out), "a", str(log), a_in, 1.0))
    a.start()
    assert a_in.wait(60)
    b = ctx.Process(target=_hold_lock, args=(str(out), "b", str(log), b_in, 1.0))
    b.start()  # opens a's .lock and waits on it (a holds it for a second)
    assert b_in.wait(60)
    c = ctx.Process(target=_hold_lock, args=(str(out), "c", str(log), None, 0.0))
    c.start()
    for p in (a, b, c):
        p.join(60)
        assert p.exitcode == 0
    lines = log.read_text().splitlines()
    assert lines == ["a in", "a out", "b in", "b out", "c in", "c out"]  # never two inside at once
    assert not (out / ".lock").exists()
