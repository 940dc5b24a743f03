"""``mlprof ui`` as a real subprocess: binds loopback by default, refuses other
addresses unless asked, and ``mlprof ui stop --port N`` stops it."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from mlprof.ui.runtime import check_host
from mlprof.errors import ConfigError


def _env(tmp_path: Path) -> dict:
    env = dict(os.environ)
    env["XDG_RUNTIME_DIR"] = str(tmp_path)  # pid records of this test only
    env.pop("MLPROF_DEBUG", None)
    return env


def _serve(argv: list[str], env: dict) -> tuple[subprocess.Popen, int]:
    """``mlprof ui`` started as ``argv`` (its loopback address on port 0): the process and its port."""
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    line = proc.stdout.readline()
    match = re.search(r"http://127\.0\.0\.1:(\d+)/", line)
    if not match:
        proc.kill()
        raise AssertionError(line + proc.stderr.read())
    return proc, int(match.group(1))


def _stop_and_check(proc: subprocess.Popen, port: int, env: dict, runtime_dir: Path) -> None:
    """`mlprof ui stop --port PORT` stops the server: exit 0, the process ends with 0, its record is gone
    (killed anyway, after the checks, if it did not stop)."""
    try:
        stop = _mlprof("ui", "stop", "--port", str(port), env=env)
        assert stop.returncode == 0, stop.stderr
        assert f"pid {proc.pid}" in stop.stdout
        assert proc.wait(timeout=15) == 0
        assert not (runtime_dir / "mlprof-ui" / f"ui-{port}.json").exists()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)


def _mlprof(*args, env, timeout=30) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mlprof", *args], capture_output=True, text=True, env=env,
                          timeout=timeout)


@pytest.mark.parametrize("host", ["0.0.0.0", "192.168.1.10", "::", "example.com"])
def test_non_loopback_hosts_are_refused_without_allow_remote(tmp_path, logdir, host):
    r = _mlprof("ui", "--logdir", str(logdir), "--host", host, "--port", "0", env=_env(tmp_path))
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("mlprof ui: error: --host")
    assert "Traceback" not in r.stderr


def test_loopback_hosts_are_accepted():
    for host in ("127.0.0.1", "localhost", "::1", "127.0.0.5"):
        check_host(host, allow_remote=False)
    with pytest.raises(ConfigError):
        check_host("10.0.0.1", allow_remote=False)
    check_host("10.0.0.1", allow_remote=True)


def test_stop_without_a_server_is_a_one_line_error(tmp_path):
    r = _mlprof("ui", "stop", "--port", "1", env=_env(tmp_path))
    assert r.returncode != 0
    assert r.stderr.strip() == "mlprof ui: error: no mlprof ui server recorded on port 1"


def test_missing_logdir_is_a_one_line_error(tmp_path):
    r = _mlprof("ui", "--logdir", str(tmp_path / "nope"), env=_env(tmp_path))
    assert r.returncode == 2 and "not a directory" in r.stderr and r.stderr.count("\n") == 1


def test_ui_serves_on_loopback_by_default_and_stops_by_port(tmp_path, logdir):
    env = _env(tmp_path)
    proc, port = _serve([sys.executable, "-m", "mlprof", "ui", "--logdir", str(logdir), "--port", "0"], env)
    try:
        record = json.loads((tmp_path / "mlprof-ui" / f"ui-{port}.json").read_text())
        assert record["pid"] == proc.pid and record["host"] == "127.0.0.1"
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/runs", timeout=10) as resp:
            assert [r["name"] for r in json.loads(resp.read())["runs"]] == ["jobs/train", "jobs/train_slow"]
    finally:
        _stop_and_check(proc, port, env, tmp_path)


def test_a_port_in_use_is_a_one_line_error(tmp_path, logdir):
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        r = _mlprof("ui", "--logdir", str(logdir), "--port", str(port), env=_env(tmp_path))
    assert r.returncode != 0
    assert r.stderr.startswith(f"mlprof ui: error: cannot listen on 127.0.0.1:{port}") and r.stderr.count("\n") == 1


def test_stop_leaves_a_foreign_process_alone(tmp_path):
    env = _env(tmp_path)
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        (tmp_path / "mlprof-ui").mkdir(mode=0o700)
        (tmp_path / "mlprof-ui" / "ui-5555.json").write_text(json.dumps(
            {"pid": sleeper.pid, "host": "127.0.0.1", "port": 5555, "logdir": "/x", "started_ns": time.time_ns()}))
        r = _mlprof("ui", "stop", "--port", "5555", env=env)
        assert r.returncode != 0 and "stale record" in r.stderr
        assert sleeper.poll() is None
    finally:
        sleeper.kill()
        sleeper.wait(timeout=10)


def test_the_dashboard_works_without_torch(logdir, run_id):
    code = f"""
import sys
sys.modules["torch"] = None  # any import of torch now fails
import warnings
warnings.simplefilter("ignore")
from starlette.testclient import TestClient
from mlprof.ui.server import create_app
with TestClient(create_app({str(logdir)!r}), base_url="http://127.0.0.1") as c:
    for path in ("/api/runs", "/api/overview", "/api/timeline/meta", "/api/cluster", "/api/data/op_statistic"):
        r = c.get(path, params={{"run": {run_id!r}}})
        assert r.status_code == 200, (path, r.text)
    assert c.get("/api/compare", params={{"run": {run_id!r}, "base": {run_id!r}}}).status_code == 200
assert "torch" not in [m for m in sys.modules if sys.modules[m] is not None]
print("ok")
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr


@pytest.mark.parametrize("host, remote", [("127.0.0.2", False), ("0.0.0.0", True)])
def test_ui_answers_its_own_url_and_warns_when_remote(tmp_path, logdir, host, remote):
    env = _env(tmp_path)
    cmd = [sys.executable, "-m", "mlprof", "ui", "--logdir", str(logdir), "--port", "0", "--host", host]
    proc = subprocess.Popen(cmd + (["--allow-remote"] if remote else []),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        line = proc.stdout.readline()
        match = re.search(r"http://([0-9.]+):(\d+)/", line)
        assert match, line + (proc.stderr.read() if proc.poll() is not None else "")
        url_host = "127.0.0.1" if host == "0.0.0.0" else host
        with urllib.request.urlopen(f"http://{url_host}:{match.group(2)}/api/runs", timeout=10) as resp:
            assert resp.status == 200
        stop = _mlprof("ui", "stop", "--port", match.group(2), env=env)
        assert stop.returncode == 0, stop.stderr
        proc.wait(timeout=15)
        err = proc.stderr.read()
        assert ("no login" in err) == remote, err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)


def test_ui_stop_ends_a_server_in_the_middle_of_a_long_analysis(tmp_path, logdir):
    """An advisor request that runs for minutes (here: one that sleeps) must not keep `mlprof ui stop` waiting
    or the process alive; the other pages keep answering meanwhile."""
    env = _env(tmp_path)
    code = ("import sys, time\n"
            "import mlprof.analysis.advisor as advisor\n"
            "advisor.advise = lambda *a, **k: time.sleep(300)\n"
            "from mlprof.cli.main import main\n"
            "sys.exit(main(sys.argv[2:]))\n")
    proc, port = _serve([sys.executable, "-c", code, "mlprof", "ui", "--logdir", str(logdir), "--port", "0"], env)
    try:

        def slow_request():
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/api/advisor?run=jobs/train_mlprof_output", timeout=60)
            except OSError:
                pass  # the server went away under it

        threading.Thread(target=slow_request, daemon=True).start()
        time.sleep(1.0)  # the advisor is running
        # The same run's other pages still answer while it runs (the advisor has its own connection).
        for path in ("/api/data/steps", "/api/timeline/meta"):
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}?run=jobs/train_mlprof_output",
                                        timeout=20) as resp:
                assert json.loads(resp.read())
    finally:
        _stop_and_check(proc, port, env, tmp_path)
