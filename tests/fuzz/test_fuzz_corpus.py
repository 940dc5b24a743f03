"""Every command on a generated corpus of malformed traces and captures (issue 12).

Each run must exit with a documented code (never 1, "internal error"), print
at most one line on stderr, leave nothing behind when it fails, and never
change its input. All commands run in-process (fast); a representative subset
also runs as a real subprocess.
"""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mlprof.cli.main import main

from .corpus import cases
from tree_state import snapshot

DOCUMENTED = {0, 2, 3, 4, 5, 6}
CASES = cases()
COMMANDS = [["parse", "{p}"], ["export", "{p}"], ["query", "{p}"], ["advise", "{p}"], ["op", "{p}", "--name", "aten::mm"],
            ["modules", "{p}"], ["callsites", "{p}"], ["compare", "{p}", "{p}"], ["cluster", "{p}"]]


def test_the_corpus_is_large_enough():
    assert len(CASES) >= 100


def _in_process(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exc:  # argparse
            code = exc.code if isinstance(exc.code, int) else 2
    return code, out.getvalue(), err.getvalue()


def _check(case: str, argv: list[str], code: int, err: str, before: dict, after: dict, inputs: dict) -> None:
    where = f"{case}: mlprof {' '.join(argv[:1])}"
    assert code in DOCUMENTED, f"{where}: exit {code}: {err}"
    assert err.count("\n") <= 1 and "Traceback" not in err, f"{where}: {err}"
    assert not any(c in err for c in "\x1b\x07\x9b"), f"{where}: a control character printed raw: {err!r}"
    if code != 0:
        assert err.startswith(f"mlprof {argv[0]}: error: "), f"{where}: {err}"
        assert after == before, f"{where}: left {set(after) ^ set(before)}"
    assert {k: after.get(k) for k in inputs} == inputs, f"{where}: changed its input"


@pytest.mark.parametrize("name, build", CASES, ids=[n for n, _ in CASES])
def test_every_command_refuses_or_reads_malformed_input_cleanly(tmp_path, monkeypatch, name, build):
    monkeypatch.setenv("MLPROF_PARSE_WORKERS", "1")
    case_dir = tmp_path / "case"
    case_dir.mkdir()
    target = build(case_dir)
    inputs = snapshot(case_dir)
    for command in COMMANDS:
        argv = [a.format(p=target) for a in command]
        before = snapshot(case_dir)
        code, _, err = _in_process(argv)
        _check(name, argv, code, err, before, snapshot(case_dir), inputs)


SUBPROCESS_CASES = ["truncated_200", "field_ts_0", "doc_7", "doc_19", "gzip_truncated_20", "manifest_0",
                    "window_2", "capture_trace_fifo", "field_args_6", "doc_24", "name_with_escapes",
                    "capture_output_symlink_out", "gzip_bomb_then_noise",
                    # issue 30: internal errors (exit 1) and silent exits 0 before
                    "step_number_past_64_bits", "all_durations_negative", "name_of_242_characters",
                    "cpu_op_without_ts", "cat_of_10_mib"] + [n for n, _ in CASES if n.startswith("ascend_")]


@pytest.mark.parametrize("name", SUBPROCESS_CASES)
def test_as_a_real_subprocess(tmp_path, name):
    build = dict(CASES)[name]
    case_dir = tmp_path / "case"
    case_dir.mkdir()
    target = build(case_dir)
    inputs = snapshot(case_dir)
    for command in (["parse", "{p}"], ["advise", "{p}"]):
        argv = [a.format(p=target) for a in command]
        before = snapshot(case_dir)
        env = dict(os.environ, MLPROF_PARSE_WORKERS="1")
        env.pop("MLPROF_DEBUG", None)
        r = subprocess.run([sys.executable, "-m", "mlprof", *argv], capture_output=True, text=True, env=env,
                           timeout=120)
        _check(name, argv, r.returncode, r.stderr, before, snapshot(case_dir), inputs)
