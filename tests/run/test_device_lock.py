"""The device lock never writes through a planted symlink (issue 12, item 17)."""

from __future__ import annotations

import os

import pytest

from mlprof.collect.device_lock import DeviceLock, default_lock_dir
from mlprof.errors import MlprofError


def test_planted_lock_file_symlink_is_refused_and_its_target_untouched(tmp_path):
    locks = tmp_path / "locks"
    locks.mkdir(mode=0o700)
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    (locks / "device-all.lock").symlink_to(victim)
    with pytest.raises(MlprofError, match="symlink"):
        DeviceLock(["all"], lock_dir=locks).acquire()
    assert victim.read_text() == "precious"


def test_lock_dir_that_is_a_symlink_is_refused(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "locks").symlink_to(elsewhere)
    with pytest.raises(MlprofError, match="symlink"):
        DeviceLock(["0"], lock_dir=tmp_path / "locks").acquire()
    assert list(elsewhere.iterdir()) == []


def test_lock_dir_is_made_private_and_locks_work(tmp_path):
    locks = tmp_path / "locks"
    with DeviceLock(["0", "1"], lock_dir=locks):
        assert (os.stat(locks).st_mode & 0o777) == 0o700
        with pytest.raises(MlprofError, match="device 1 is already being profiled"):
            DeviceLock(["1"], lock_dir=locks).acquire()
    assert all((os.stat(p).st_mode & 0o077) == 0 for p in locks.iterdir())


def test_default_lock_dir_is_per_user(monkeypatch):
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    assert default_lock_dir().name == f"mlprof-locks-{os.geteuid()}"


def test_cpu_only_hosts_hold_no_lock_and_gpu_hosts_lock_what_the_job_sees(tmp_path):
    from mlprof.collect.device_lock import devices_of

    assert devices_of({}, has_accelerator=False) == []
    assert devices_of({"CUDA_VISIBLE_DEVICES": "0"}, has_accelerator=False) == []
    assert devices_of({}, has_accelerator=True) == ["all"]
    assert devices_of({"CUDA_VISIBLE_DEVICES": "1, 3"}, has_accelerator=True) == ["1", "3"]
    locks = tmp_path / "locks"
    with DeviceLock([], lock_dir=locks), DeviceLock([], lock_dir=locks):
        pass  # two CPU-only runs side by side
    assert not locks.exists()
