"""Inputs this user may not read, an input name too long to derive an output name from, and a
cluster with no readable rank (issue 30, items 8 and 12): each command, as a real subprocess,
exits with the code docs/cli.md gives (3: missing or unreadable input), one line, no traceback.

Root reads any file, so as root the commands run without the capabilities that let it
(CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, dropped from the bounding set before exec): a folder of
mode 0 is then as closed to them as to any user.
"""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fuzz.corpus import good_trace_text

COMMANDS = [["parse"], ["query"], ["advise"], ["op", "--name", "aten::mm"], ["modules"], ["callsites"], ["export"],
            ["compare", "{p}"], ["cluster"]]
_PR_CAPBSET_DROP = 24
_CAP_DAC_OVERRIDE, _CAP_DAC_READ_SEARCH = 1, 2


def _as_an_ordinary_user() -> None:
    if os.geteuid() != 0:
        return
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in (_CAP_DAC_OVERRIDE, _CAP_DAC_READ_SEARCH):
        if libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


def _mlprof(*argv, closed: bool = False) -> subprocess.CompletedProcess:
    env = dict(os.environ, MLPROF_PARSE_WORKERS="1")
    env.pop("MLPROF_DEBUG", None)
    return subprocess.run([sys.executable, "-m", "mlprof", *map(str, argv)], capture_output=True, text=True,
                          env=env, timeout=300, preexec_fn=_as_an_ordinary_user if closed else None)


def _closed_is_closed(path: Path) -> bool:
    r = subprocess.run([sys.executable, "-c", f"import os; os.listdir({str(path)!r})"], capture_output=True,
                       preexec_fn=_as_an_ordinary_user)
    return r.returncode != 0


def _every_command(path: Path, code: int, says: str) -> None:
    for command in COMMANDS:
        argv = [command[0], path, *(a.format(p=path) for a in command[1:])]
        r = _mlprof(*argv, closed=True)
        assert r.returncode == code, (command[0], r.returncode, r.stderr)
        assert r.stderr.startswith(f"mlprof {command[0]}: error: ") and r.stderr.count("\n") == 1, r.stderr
        assert says in r.stderr and "internal error" not in r.stderr, r.stderr


def test_a_folder_that_cannot_be_entered_is_unreadable_input_for_every_command(tmp_path):
    closed = tmp_path / "closed"
    closed.mkdir()
    (closed / "t.pt.trace.json").write_bytes(good_trace_text())
    closed.chmod(0)
    try:
        if not _closed_is_closed(closed):
            pytest.skip("this user reads a folder of mode 0 even without CAP_DAC_*")
        _every_command(closed, 3, f"{closed}: cannot read: Permission denied")
    finally:
        closed.chmod(0o700)


def test_a_trace_that_cannot_be_read_is_unreadable_input_exit_3_not_4(tmp_path):
    trace = tmp_path / "t.pt.trace.json"
    trace.write_bytes(good_trace_text())
    trace.chmod(0)
    _every_command(trace, 3, f"{trace}: cannot read: Permission denied")


@pytest.mark.long  # every command as a subprocess; trace_output_dir's naming is tested directly below
def test_a_trace_name_of_242_characters_gets_a_shortened_output_folder(tmp_path):
    trace = tmp_path / ("n" * 242)
    trace.write_bytes(good_trace_text())
    for command in COMMANDS:
        argv = [command[0], trace, *(a.format(p=trace) for a in command[1:])]
        r = _mlprof(*argv)
        assert r.returncode == 0 and "error" not in r.stderr, (command[0], r.returncode, r.stderr)
    (out,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    assert out.name.startswith("n" * 100) and out.name.endswith("_mlprof_output") and len(out.name) == 255
    assert (out / "tables").is_dir()


def test_two_long_names_sharing_their_start_get_two_folders(tmp_path):
    from mlprof.tables.layout import trace_output_dir

    a, b = tmp_path / ("é" * 130 + "a.json"), tmp_path / ("é" * 130 + "b.json")
    assert trace_output_dir(a) != trace_output_dir(b) and trace_output_dir(a) == trace_output_dir(a)
    for out in (trace_output_dir(a), trace_output_dir(b)):
        assert len(os.fsencode(out.name)) <= 255
        out.name.encode("utf-8")  # no character cut in two
    short = tmp_path / "rank0.pt.trace.json"
    assert trace_output_dir(short).name == "rank0_mlprof_output"


@pytest.mark.parametrize("bad, code", [
    (b'{"traceEvents": [', 4),  # a bad trace: exit 4, as `mlprof parse` of it
    (None, 3),  # an unreadable one: exit 3
])
def test_cluster_with_no_readable_rank_exits_as_parse_does(tmp_path, bad, code):
    for rank in range(2):
        trace = tmp_path / f"rank{rank}.pt.trace.json"
        trace.write_bytes(bad if bad is not None else good_trace_text())
        if bad is None:
            trace.chmod(0)
    r = _mlprof("cluster", tmp_path, closed=True)
    assert r.returncode == code, r.stderr
    assert r.stderr.startswith("mlprof cluster: error: ") and str(tmp_path / "rank0.pt.trace.json") in r.stderr
    assert _mlprof("parse", tmp_path, closed=True).returncode == code
