"""The ASGI app of ``mlprof ui``: read-only routes over the runs of one logdir.

Only GET and HEAD are answered. Runs are named by ids checked against the
logdir (``discovery.resolve_run_dir``), static files come from the package's
own ``static/`` dir, and while bound to loopback the Host header must name
loopback too, so a web page elsewhere cannot reach the dashboard through DNS
rebinding.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Callable
from pathlib import Path

import msgspec
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Receive, Scope, Send

from mlprof.errors import ConfigError, MlprofError
from mlprof.ui import api
from mlprof.ui.answer_cache import cached_answer, tables_signature
from mlprof.ui.cluster_view import cluster_answer, cluster_members, cluster_rows
from mlprof.ui.compare_view import compare_answer, compare_rows
from mlprof.ui.datasets import Params
from mlprof.ui.discovery import RunPathRefused, resolve_run_dir
from mlprof.ui.stores import StoreCache
from mlprof.ui.run_summaries import SummaryCache

__all__ = ["create_app", "STATIC_DIR", "LOOPBACK_HOSTS"]

STATIC_DIR = Path(__file__).parent / "static"
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1", "[::1]")
_CSP = ("default-src 'self'; img-src 'self' data: blob:; style-src 'self'; script-src 'self'; "
        "connect-src 'self'; object-src 'none'; frame-ancestors 'none'; base-uri 'none'")
_MAX_QUERY_LEN = 200
# Integer query parameters (times in ns, ids) must stay well inside int64.
_MAX_INT_ARG = 2**62


class _Guard:
    """Refuses writes and foreign Host headers; adds the security headers."""

    def __init__(self, app: ASGIApp, allowed_hosts: tuple[str, ...] | None) -> None:
        self.app = app
        self.allowed_hosts = allowed_hosts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        if scope["method"] not in ("GET", "HEAD"):
            return await _json_error(405, "the dashboard is read-only")(scope, receive, send)
        if self.allowed_hosts is not None:
            host = dict(scope["headers"]).get(b"host", b"").decode("latin-1")
            name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
            if name not in self.allowed_hosts:
                return await _json_error(403, f"host {host!r} refused")(scope, receive, send)

        async def send_with_headers(message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers += [(b"content-security-policy", _CSP.encode()), (b"x-content-type-options", b"nosniff"),
                            (b"referrer-policy", b"no-referrer"), (b"x-frame-options", b"DENY")]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_headers)


def _json_error(status: int, message: str) -> Response:
    return JSONResponse({"error": message}, status_code=status)


def _json(data, status: int = 200) -> Response:
    # msgspec: fast on large timeline answers; NaN/inf become null.
    return Response(msgspec.json.encode(data), status_code=status, media_type="application/json")


def _int_arg(request: Request, key: str, default: int | None = None) -> int | None:
    value = request.query_params.get(key)
    if value is None or value == "":
        return default
    try:
        number = int(value[:40])
    except ValueError:
        raise ConfigError(f"{key}={value[:40]!r}: not an integer") from None
    if len(value) > 40 or not -_MAX_INT_ARG <= number <= _MAX_INT_ARG:
        raise ConfigError(f"{key}={value[:40]!r}: out of range")
    return number


def _table(request: Request, name: str, rows: list[dict]) -> Response:
    """Rows as JSON or CSV (``format=``), as a download (``download=1``) or not."""
    fmt = request.query_params.get("format", "json")
    if fmt not in ("json", "csv"):
        raise ConfigError(f"format={fmt[:20]!r}: use json or csv")
    headers = {}
    total = getattr(rows, "total", None)
    if total is not None:  # rows cut at a limit: the page says "500 of N"
        headers["x-total-rows"] = str(total)
    if request.query_params.get("download"):
        headers["content-disposition"] = f'attachment; filename="{name}.{fmt}"'
    if fmt == "csv":
        return Response(api.rows_to_csv(rows), media_type="text/csv; charset=utf-8", headers=headers)
    return Response(msgspec.json.encode(rows), media_type="application/json", headers=headers)


async def _answer(prepare: Callable[[], Callable[[], Response]], analysis_error_status: int) -> Response:
    """Run ``prepare()`` (path checks) here and its work in a thread; every failure is one JSON line.

    403 for a refused path, 404/400 for a missing run or bad parameter,
    ``analysis_error_status`` for an mlprof error of the analysis, 500 for a bug
    (the server goes on).
    """
    try:
        return await run_in_threadpool(prepare())
    except RunPathRefused as exc:
        return _json_error(403, str(exc))
    except ConfigError as exc:
        return _json_error(404 if "no parsed run" in str(exc) else 400, str(exc))
    except MlprofError as exc:
        return _json_error(analysis_error_status, str(exc))
    except Exception as exc:  # a bug or a broken table file
        return _json_error(500, f"internal error: {type(exc).__name__}: {str(exc).splitlines()[0][:300]}")


def _word(text: str) -> str:
    """A file-name-safe word for ``text`` (a compared run's cache file per base run)."""
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def create_app(logdir: Path, allowed_hosts: tuple[str, ...] | None = LOOPBACK_HOSTS) -> ASGIApp:
    """The dashboard app over ``logdir``; ``allowed_hosts=None`` accepts any Host header."""
    logdir = Path(logdir).resolve()
    if not logdir.is_dir():
        raise ConfigError(f"{logdir}: not a directory")
    stores = StoreCache()
    summaries = SummaryCache()

    def with_run(handler):
        async def endpoint(request: Request) -> Response:
            def prepare():
                run_dir = resolve_run_dir(logdir, request.query_params.get("run", ""))

                def work():
                    with stores.use(run_dir) as run:
                        return handler(request, run)
                return work
            return await _answer(prepare, analysis_error_status=500)
        return endpoint

    async def compare_endpoint(request: Request) -> Response:
        def prepare():
            base_dir = resolve_run_dir(logdir, request.query_params.get("base", ""))
            new_dir = resolve_run_dir(logdir, request.query_params.get("run", ""))
            section = request.path_params.get("section")

            def work():
                with stores.use_two(base_dir, new_dir) as (base, new):
                    key = ("compare", str(base_dir), base.signature, new.signature)
                    answer = new.derived.get(key)
                    if answer is None:  # the page asks once per section download: compare once
                        answer = cached_answer(new_dir, "compare-" + _word(str(base_dir)), key,
                                               lambda: compare_answer(base, new))
                        new.derived[key] = answer
                if section is None:
                    return _json(answer)
                return _table(request, f"compare_{section}", compare_rows(answer, section))
            return work
        return await _answer(prepare, analysis_error_status=422)  # e.g. a run without steps to align

    async def cluster_endpoint(request: Request) -> Response:
        def prepare():
            run_id = request.query_params.get("run", "")
            resolve_run_dir(logdir, run_id)
            section = request.path_params.get("section")

            def work():
                members = {rid: resolve_run_dir(logdir, rid) for rid in cluster_members(logdir, run_id)}
                # Every rank's tables are read: the answer is kept (in the run's own cache) until one changes.
                key = ("cluster", tuple((rid, str(path), tables_signature(path)) for rid, path in members.items()))
                answer = cached_answer(resolve_run_dir(logdir, run_id), "cluster", key,
                                       lambda: cluster_answer(logdir, members))
                if section is None:
                    return _json(answer)
                return _table(request, f"cluster_{section}", cluster_rows(answer, section))
            return work
        return await _answer(prepare, analysis_error_status=422)

    async def index(request: Request) -> Response:
        return FileResponse(STATIC_DIR / "index.html", headers={"cache-control": "no-cache"})

    async def runs(request: Request) -> Response:
        return _json(await run_in_threadpool(api.runs_answer, logdir, summaries))

    async def features(request: Request) -> Response:
        if not request.query_params.get("run"):  # without a run: what every run may have (dataset names)
            return _json({**api.dataset_catalog(), "phases": api.PHASES})

        def prepare():
            run_id = request.query_params.get("run", "")
            resolve_run_dir(logdir, run_id)
            return lambda: _json(api.features_answer(logdir, run_id, summaries))
        return await _answer(prepare, analysis_error_status=500)

    def job_of(request: Request) -> list[dict]:
        return api.job_members(logdir, request.query_params.get("run", ""), summaries)

    def advice(run_dir: Path, request: Request) -> dict:
        """The run's advisor answer: from the open run's memory, else computed (or read from disk) outside
        the run's lock, so its other pages (the timeline) answer while a long analysis runs."""
        job = job_of(request)
        with stores.use(run_dir) as run:
            signature = run.signature
            key = api.advisor_key(signature, job)
            answer = run.derived.get(key)
        if answer is None:
            answer = api.advisor_or_reason(run_dir, signature, job)
            if answer.get("available"):
                with stores.use(run_dir) as run:
                    if run.signature == signature:
                        run.derived[key] = answer
        return answer

    def without_lock(handler):
        async def endpoint(request: Request) -> Response:
            def prepare():
                run_dir = resolve_run_dir(logdir, request.query_params.get("run", ""))
                return lambda: handler(request, run_dir)
            return await _answer(prepare, analysis_error_status=500)
        return endpoint

    def overview(request: Request, run_dir: Path) -> Response:
        advisor_answer = advice(run_dir, request)
        with stores.use(run_dir) as run:
            return _json(api.overview_answer(run, _int_arg(request, "step"), advisor_answer))

    def advisor(request: Request, run_dir: Path) -> Response:
        answer = advice(run_dir, request)
        if not answer.get("available"):
            raise ImportError(answer.get("reason"))
        if request.query_params.get("format"):
            return _table(request, "advisor", [{k: v for k, v in f.items() if k != "evidence"}
                                               for f in answer["findings"]])
        return _json(answer)

    def data(request: Request, run) -> Response:
        name = request.path_params["name"]
        q = request.query_params
        params = Params(step=_int_arg(request, "step"), name=q.get("name"), input_dims=q.get("input_dims"),
                        phase=q.get("phase"), device=q.get("device"), t0=_int_arg(request, "t0"),
                        t1=_int_arg(request, "t1"))
        return _table(request, name, api.dataset_rows(run, name, params))

    def tl_meta(request: Request, run) -> Response:
        return _json(api.timeline_meta(run))

    def tl_window(request: Request, run) -> Response:
        tracks_arg = request.query_params.get("tracks")
        tracks = None
        if tracks_arg:
            try:
                tracks = [int(t[:20]) for t in tracks_arg.split(",")[:10_000]]
                if any(not -_MAX_INT_ARG <= t <= _MAX_INT_ARG for t in tracks):
                    raise ValueError
            except ValueError:
                raise ConfigError("tracks: comma-separated integers") from None
        answer = api.timeline_window(run, _int_arg(request, "t0", 0), _int_arg(request, "t1", 1),
                                     _int_arg(request, "px", 1000), tracks)
        if request.query_params.get("format"):
            return _table(request, "timeline_window", api.timeline_window_rows(run, answer))
        return _json(answer)

    def tl_range(request: Request, run) -> Response:
        return _json(api.timeline_range(run, _int_arg(request, "t0", 0), _int_arg(request, "t1", 1)))

    def tl_search(request: Request, run) -> Response:
        text = request.query_params.get("q", "")
        if not text or len(text) > _MAX_QUERY_LEN:
            raise ConfigError(f"q: 1 to {_MAX_QUERY_LEN} characters")
        return _json(api.timeline_search(run, text))

    def tl_event(request: Request, run) -> Response:
        found = api.timeline_event(run, _int_arg(request, "src", -1), _int_arg(request, "id", -1))
        if found is None:
            return _json_error(404, "no such event")
        return _json(found)

    def tl_locate(request: Request, run) -> Response:
        found = api.timeline_locate(run, _int_arg(request, "src"), _int_arg(request, "id"),
                                    request.query_params.get("name"), _int_arg(request, "step"))
        if found is None:
            return _json_error(404, "no such event")
        return _json(found)

    routes = [
        Route("/", index),
        Route("/favicon.ico", lambda request: Response(status_code=204)),
        Route("/api/runs", runs),
        Route("/api/features", features),
        Route("/api/overview", without_lock(overview)),
        Route("/api/advisor", without_lock(advisor)),
        Route("/api/data/{name}", with_run(data)),
        Route("/api/compare", compare_endpoint),
        Route("/api/compare/{section}", compare_endpoint),
        Route("/api/cluster", cluster_endpoint),
        Route("/api/cluster/{section}", cluster_endpoint),
        Route("/api/timeline/meta", with_run(tl_meta)),
        Route("/api/timeline/window", with_run(tl_window)),
        Route("/api/timeline/range", with_run(tl_range)),
        Route("/api/timeline/search", with_run(tl_search)),
        Route("/api/timeline/event", with_run(tl_event)),
        Route("/api/timeline/locate", with_run(tl_locate)),
        Mount("/static", StaticFiles(directory=STATIC_DIR, follow_symlink=False), name="static"),
    ]
    @contextlib.asynccontextmanager
    async def lifespan(app):
        yield
        stores.close()

    app = Starlette(routes=routes, lifespan=lifespan)
    return _Guard(app, allowed_hosts)
