"""Every test of `mlprof run` gets its own device-lock directory: runs in parallel never share a lock."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def private_locks(tmp_path, monkeypatch):
    monkeypatch.setenv("MLPROF_LOCK_DIR", str(tmp_path / "locks"))
