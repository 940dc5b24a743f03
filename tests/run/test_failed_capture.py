"""After a capture fails, `mlprof run` says what failed, and profiler_info.json says it too (issue 30, item 11).

It used to say "the job ended before its first optimizer step" and leave
the capture `running`. Real jobs, a real full disk (a small tmpfs, where
this machine lets us mount one) and a real SIGKILL.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from .test_mlprof_run import SCRIPT, captures, mlprof_run  # noqa: F401 - fixture

pytest.importorskip("torch")
FREE_BYTES = 64 * 1024  # room for the capture's first files, not for a window


@pytest.fixture
def full_disk(tmp_path):
    """A 2 MiB tmpfs with FREE_BYTES left."""
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m,mode=0700", "tmpfs", str(mount)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        st = os.statvfs(mount)
        with open(mount / "filler", "wb") as f:
            os.posix_fallocate(f.fileno(), 0, st.f_bavail * st.f_frsize - FREE_BYTES)
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


@pytest.mark.long  # 21 s; CI's 20 minutes (a fresh clone took 1,142-1,226 s, 2026-11-29)
def test_a_full_disk_is_reported_as_the_failure_and_recorded(full_disk):
    out = full_disk / "out"
    # --host-sys "": the run's sampler must not take the free space first.
    result = mlprof_run(out, sys.executable, str(SCRIPT), "14",
                        options=["--skip-first", "1", "--host-sys", "", "--no-parse"])
    assert result.returncode == 0, result.stderr
    assert "before its first optimizer step" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if "the capture failed" in line]
    assert len(lines) == 1, result.stderr
    assert "No space left on device" in lines[0] or "is full" in lines[0], lines[0]
    for capture in captures(out):
        info = json.loads((capture / "profiler_info.json").read_text())
        assert info["status"] == "failed" and info["error"], info
        assert not list((capture / "raw").glob(".partial_*")), "a half-written window is removed"


@pytest.mark.long  # 17 s; tests/collect/test_sigkill.py kills a real job in CI (2026-11-29)
def test_a_job_killed_during_a_capture_is_reported_with_its_signal(tmp_path):
    out = tmp_path / "out"
    result = mlprof_run(out, sys.executable, str(SCRIPT), "14", "--kill-at", "4",
                        options=["--skip-first", "1", "--active", "8", "--no-parse"])
    assert result.returncode == 137, result.stderr
    assert "before its first optimizer step" not in result.stderr
    (capture,) = captures(out)
    lines = [line for line in result.stderr.splitlines() if "the capture failed" in line]
    assert lines == [f"mlprof run: warning: {capture}: the capture failed: the job ended (exit code 137, SIGKILL) "
                     "before the capture was closed"], result.stderr
    info = json.loads((capture / "profiler_info.json").read_text())
    assert info["status"] == "failed" and "SIGKILL" in info["error"]
