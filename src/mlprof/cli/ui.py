"""``mlprof ui --logdir DIR``: serve the web dashboard; ``mlprof ui stop --port N``: stop it."""

from __future__ import annotations

import argparse
import contextlib
import os
import threading
import signal
import sys
import time
from pathlib import Path

from mlprof.errors import ConfigError
from mlprof.cli.exit_codes import EXIT_OK

__all__ = ["register", "run"]


# Seconds a request still running at shutdown is given before the server drops it.
SHUTDOWN_GRACE_S = 2


def register(sub) -> None:
    # --logdir is required to serve, not to stop: argparse cannot say that, so the usage does.
    p = sub.add_parser("ui", help="serve the web dashboard of the runs under a directory (or stop it)",
                       usage="mlprof ui --logdir DIR [--port N] [--host HOST] [--allow-remote]\n"
                             "       mlprof ui stop [--port N]",
                       description="Serve a local, read-only web dashboard of the parsed runs under --logdir, "
                                   "bound to 127.0.0.1. `mlprof ui stop --port N` stops a server started here.")
    p.add_argument("action", nargs="?", choices=["stop"], help="stop the server started on --port")
    p.add_argument("--logdir", type=Path, metavar="DIR",
                   help="required (except with stop): directory searched for runs (captures, traces)")
    p.add_argument("--port", type=int, default=8080, metavar="N", help="TCP port (default 8080; 0 picks a free one)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--allow-remote", action="store_true",
                   help="allow a non-loopback --host (the dashboard has no login)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from mlprof.ui import runtime

    if not 0 <= args.port <= 65535:
        raise ConfigError(f"--port {args.port}: not a TCP port")
    if args.action == "stop":
        record = runtime.stop_server(args.port)
        print(f"mlprof ui: stopped the server on {record.host}:{record.port} (pid {record.pid})")
        return EXIT_OK
    if args.logdir is None:
        raise ConfigError("--logdir DIR is required (usage: mlprof ui --logdir DIR [--port N])")
    logdir = args.logdir.resolve()
    if not logdir.is_dir():
        raise ConfigError(f"--logdir {args.logdir}: not a directory")
    runtime.check_host(args.host, args.allow_remote)
    try:
        import uvicorn

        from mlprof.ui.server import LOOPBACK_HOSTS, create_app
    except ImportError as exc:
        raise ConfigError(f"mlprof ui needs {exc.name}: pip install starlette uvicorn") from None
    sock = runtime.bind_socket(args.host, args.port)
    port = sock.getsockname()[1]
    # The address asked for is one the browser will name (127.0.0.2 is loopback too).
    allowed = None if args.allow_remote else LOOPBACK_HOSTS + (args.host, f"[{args.host.strip('[]')}]")
    if args.allow_remote:
        print(f"mlprof ui: warning: serving on {args.host} to the network; the dashboard has no login, "
              f"anyone who can reach this port can read every run under {logdir}", file=sys.stderr, flush=True)
    app = create_app(logdir, allowed_hosts=allowed)
    runtime.write_record(runtime.ServerRecord(pid=os.getpid(), host=args.host, port=port, logdir=str(logdir),
                                              started_ns=time.time_ns()))
    shown = f"[{args.host}]" if ":" in args.host else args.host
    print(f"mlprof ui: serving {logdir} at http://{shown}:{port}/ "
          f"(stop: Ctrl+C or `mlprof ui stop --port {port}`)", flush=True)
    class Server(uvicorn.Server):
        # uvicorn re-raises SIGTERM after shutting down, which kills the process
        # before our pid record is removed; `mlprof ui stop` is a normal exit.
        @contextlib.contextmanager
        def capture_signals(self):
            previous = {sig: signal.signal(sig, self.handle_exit) for sig in (signal.SIGINT, signal.SIGTERM)}
            try:
                yield
            finally:
                for sig, handler in previous.items():
                    signal.signal(sig, handler)

    try:
        # A request in the middle of a long analysis is given 2 s, then dropped (`mlprof ui stop` waits 10 s).
        server = Server(uvicorn.Config(app, log_level="warning", lifespan="on",
                                       timeout_graceful_shutdown=SHUTDOWN_GRACE_S))
        server.run(sockets=[sock])
    finally:
        sock.close()
        runtime.remove_record(port, os.getpid())
    sys.stdout.flush()
    _exit_past_running_analyses()
    return EXIT_OK


def _exit_past_running_analyses() -> None:
    """End the process now when a worker thread is still inside an analysis: the interpreter would wait
    for it (minutes on a large run) before exiting. Exit handlers (the private temp dir's removal) run first."""
    if not any(t.is_alive() and not t.daemon for t in threading.enumerate() if t is not threading.main_thread()):
        return
    import atexit

    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
