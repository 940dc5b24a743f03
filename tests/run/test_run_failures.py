"""mlprof run when profiling cannot write, or the command cannot start (issue 12, item 19)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest


def _run(*args, tmp_path):
    env = dict(os.environ, MLPROF_LOCK_DIR=str(tmp_path / "locks"))
    return subprocess.run([sys.executable, "-m", "mlprof", "run", *args], capture_output=True, text=True,
                          env=env, timeout=120)


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes everywhere")
def test_unwritable_output_runs_the_job_unprofiled_and_says_so(tmp_path):
    locked = tmp_path / "ro"
    locked.mkdir(mode=0o500)
    marker = tmp_path / "ran"
    r = _run("--output", str(locked / "out"), "--no-parse", "--json", "--", sys.executable, "-c",
             f"open({str(marker)!r}, 'w').write('x')", tmp_path=tmp_path)
    assert r.returncode == 0, r.stderr
    assert marker.exists()
    assert "profiling was off" in r.stderr
    assert json.loads(r.stdout)["profiling_off"]


def test_output_that_is_a_file_runs_the_job_unprofiled(tmp_path):
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("user data")
    r = _run("--output", str(not_a_dir), "--no-parse", "--", sys.executable, "-c", "raise SystemExit(3)",
             tmp_path=tmp_path)
    assert r.returncode == 3
    assert "profiling was off" in r.stderr
    assert not_a_dir.read_text() == "user data"


def test_command_that_cannot_start_exits_127(tmp_path):
    r = _run("--output", str(tmp_path / "out"), "--no-parse", "--", str(tmp_path / "no-such-program"),
             tmp_path=tmp_path)
    assert r.returncode == 127
    assert r.stderr.count("\n") == 1 and "cannot start" in r.stderr
