"""One way to run the same work over many inputs (ranks, captures, traces), with one failure policy.

``run_batch(fn, items, workers=N)`` calls ``fn(item)`` for each item, in this
process (one worker or one item), in ``workers`` spawned processes, or on a
Dask cluster (``scheduler`` address). Every item gets an :class:`Outcome`:
its value, or the error it raised. An mlprof error is kept as it is; any other
exception (a bug met on one input) becomes an :class:`InternalError` naming
the input, so it never loses the other inputs. ``on_error="raise"`` raises
the first failure instead.

Used by ``mlprof parse --jobs`` (:func:`mlprof.parse.parse_path`) and by the
cluster analysis (:func:`mlprof.workflow.cluster`).
"""

from __future__ import annotations

import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from mlprof.errors import ConfigError, MlprofError

__all__ = ["Outcome", "InternalError", "run_batch", "DASK_CONNECT_TIMEOUT_S"]

# How long to wait for a Dask scheduler to answer before giving up.
DASK_CONNECT_TIMEOUT_S = 10


class InternalError(MlprofError):
    """An unexpected failure on one input of several: a bug, reported, the other inputs still done."""


@dataclass
class Outcome:
    item: Any
    value: Any = None
    error: MlprofError | None = None


def _label(item: Any) -> str:
    return str(getattr(item, "path", None) or item)


def _guarded(fn: Callable, item: Any) -> Outcome:
    try:
        return Outcome(item, fn(item))
    except MlprofError as exc:
        return Outcome(item, error=exc)
    except Exception as exc:  # noqa: BLE001 - a bug met on one input must not lose the others
        return Outcome(item, error=InternalError(f"{_label(item)}: internal error: {type(exc).__name__}: {exc}"))


class _Bound:
    """``_guarded`` with ``fn`` bound, picklable for worker processes (``fn`` must be a module-level function)."""

    def __init__(self, fn: Callable) -> None:
        self.fn = fn

    def __call__(self, item: Any) -> Outcome:
        return _guarded(self.fn, item)


def _on_dask(work: _Bound, items: Sequence, scheduler: str) -> list[Outcome]:
    try:
        from dask.distributed import Client
    except ImportError:
        raise ConfigError("--scheduler needs Dask: pip install 'mlprof[cluster]' "
                          "(or pip install 'dask[distributed]')") from None
    try:
        client = Client(scheduler, timeout=DASK_CONNECT_TIMEOUT_S)
    except (OSError, TimeoutError) as exc:
        raise MlprofError(f"Dask scheduler {scheduler}: cannot connect ({exc})") from None
    try:
        # pure=False: an input re-parsed after new data must not come from Dask's cache.
        return client.gather(client.map(work, list(items), pure=False))
    finally:
        client.close()


def run_batch(fn: Callable[[Any], Any], items: Sequence, workers: int | None = 1, scheduler: str | None = None,
              on_error: str = "continue") -> list[Outcome]:
    """``fn`` over ``items``, in order; ``workers=None`` is one process per CPU."""
    if on_error not in ("continue", "raise"):
        raise ConfigError(f"on_error must be 'continue' or 'raise', not {on_error!r}")
    if workers is not None and workers < 1:
        raise ConfigError(f"workers must be >= 1, got {workers}")
    items = list(items)
    work = _Bound(fn)
    if scheduler:
        outcomes = _on_dask(work, items, scheduler)
    elif len(items) <= 1 or workers == 1:
        if on_error == "raise":  # in this process: the original exception, traceback and all
            return [Outcome(item, fn(item)) for item in items]
        outcomes = [work(item) for item in items]
    else:
        # spawn: workers start clean (no forked DuckDB or profiler state).
        with ProcessPoolExecutor(max_workers=workers and min(workers, len(items)),
                                 mp_context=multiprocessing.get_context("spawn")) as pool:
            outcomes = list(pool.map(work, items))
    if on_error == "raise":
        for outcome in outcomes:
            if outcome.error is not None:
                raise outcome.error
    return outcomes
