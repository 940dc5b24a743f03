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


def _shared_tmp(tmp_path, monkeypatch):
    """A sticky 1777 temporary directory, no $XDG_RUNTIME_DIR, and a home of the test's own."""
    import tempfile

    shared = tmp_path / "tmp"
    shared.mkdir()
    os.chmod(shared, 0o1777)
    monkeypatch.setattr(tempfile, "tempdir", str(shared))
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    monkeypatch.delenv("MLPROF_LOCK_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "home_cache"))
    return shared


@pytest.mark.parametrize("mode", [0o700, 0o777])
def test_a_lock_dir_another_user_made_first_is_not_used_and_runs_go_on(tmp_path, monkeypatch, capsys, mode):
    """Issue 30, item 6: another user's /tmp/mlprof-locks-<uid> refused every `mlprof run` on the host."""
    shared = _shared_tmp(tmp_path, monkeypatch)
    squatted = shared / f"mlprof-locks-{os.geteuid()}"
    squatted.mkdir()
    os.chmod(squatted, mode)
    os.chown(squatted, 65534, 65534)
    with DeviceLock(["0"]) as lock:
        assert lock.lock_dir.parent == tmp_path / "home_cache" / "mlprof"
        assert (os.stat(lock.lock_dir).st_mode & 0o777) == 0o700
        with pytest.raises(MlprofError, match="device 0 is already being profiled"):
            DeviceLock(["0"]).acquire()  # the fallback is one place for all of this user's runs
    assert list(squatted.iterdir()) == []
    err = capsys.readouterr().err
    assert f"{squatted}: not used as the device lock directory (it belongs to uid 65534" in err


def test_a_lock_dir_path_planted_as_a_symlink_is_not_followed(tmp_path, monkeypatch, capsys):
    shared = _shared_tmp(tmp_path, monkeypatch)
    victim = tmp_path / "victim"
    victim.mkdir()
    (shared / f"mlprof-locks-{os.geteuid()}").symlink_to(victim)
    with DeviceLock(["all"]):
        pass
    assert list(victim.iterdir()) == [] and "it is a symlink" in capsys.readouterr().err


def test_the_web_uis_runtime_dir_falls_back_the_same_way(tmp_path, monkeypatch, capsys):
    from mlprof.ui.runtime import runtime_dir

    shared = _shared_tmp(tmp_path, monkeypatch)
    squatted = shared / f"mlprof-ui-{os.geteuid()}"
    squatted.mkdir()
    os.chown(squatted, 65534, 65534)
    assert runtime_dir().parent == tmp_path / "home_cache" / "mlprof"
    assert "belongs to uid 65534" in capsys.readouterr().err
