"""Start and stop of the ``mlprof ui`` server: binding rules and pid files.

A running server leaves ``ui-<port>.json`` (pid, host, port, logdir) in a
private runtime dir; ``mlprof ui stop --port N`` reads it and stops the
process only if that pid still runs ``mlprof ... ui`` (a recycled pid of
another program is left alone).
"""

from __future__ import annotations

import ipaddress
import json
import os
import signal
import socket
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from mlprof.errors import ConfigError, MlprofError
from mlprof.private_dirs import private_user_dir

__all__ = ["ServerRecord", "check_host", "bind_socket", "runtime_dir", "write_record", "remove_record",
           "stop_server"]


@dataclass(frozen=True)
class ServerRecord:
    pid: int
    host: str
    port: int
    logdir: str
    started_ns: int


def check_host(host: str, allow_remote: bool) -> None:
    """Loopback only unless asked: the dashboard has no login."""
    if host == "localhost":
        return
    try:
        addr = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        raise ConfigError(f"--host {host}: give an IP address (or localhost)") from None
    if not addr.is_loopback and not allow_remote:
        raise ConfigError(f"--host {host}: not a loopback address; the dashboard has no login, "
                          "add --allow-remote to serve it to the network anyway")


def bind_socket(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host.strip("[]"), port))
        sock.listen(128)
    except OSError as exc:
        sock.close()
        raise MlprofError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    sock.set_inheritable(True)
    return sock


def runtime_dir() -> Path:
    """Where the servers' records are: $XDG_RUNTIME_DIR/mlprof-ui, else <temp dir>/mlprof-ui-<uid> when it is
    ours and private (in /tmp anyone could have made it first), else one under the home directory."""
    return private_user_dir("mlprof-ui", "web UI's runtime directory")


def _record_path(port: int) -> Path:
    return runtime_dir() / f"ui-{port}.json"


def write_record(record: ServerRecord) -> Path:
    path = _record_path(record.port)
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_text(json.dumps(asdict(record)))
    os.replace(tmp, path)
    return path


def remove_record(port: int, pid: int) -> None:
    path = _record_path(port)
    try:
        if json.loads(path.read_text()).get("pid") == pid:
            path.unlink()
    except (OSError, ValueError):
        pass


def _is_ui_process(pid: int) -> bool:
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    words = [a.decode("utf-8", "replace") for a in argv if a]
    return any("mlprof" in w for w in words) and "ui" in words


def stop_server(port: int, wait_s: float = 10.0) -> ServerRecord:
    path = _record_path(port)
    try:
        data = json.loads(path.read_text())
        record = ServerRecord(**data)
    except FileNotFoundError:
        raise MlprofError(f"no mlprof ui server recorded on port {port}") from None
    except (OSError, ValueError, TypeError) as exc:
        raise MlprofError(f"{path}: unreadable server record ({exc})") from None
    if not _is_ui_process(record.pid):
        path.unlink(missing_ok=True)
        raise MlprofError(f"no mlprof ui server running on port {port} (stale record of pid {record.pid} removed)")
    os.kill(record.pid, signal.SIGTERM)
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if not _is_ui_process(record.pid):
            path.unlink(missing_ok=True)
            return record
        time.sleep(0.1)
    raise MlprofError(f"mlprof ui server pid {record.pid} on port {port} did not stop within {wait_s:.0f} s")
