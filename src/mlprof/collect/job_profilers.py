"""Seeing the job start a torch profiler session of its own, before it starts (``mlprof run``).

torch runs one profiler session per process. A session the job starts beside
``mlprof run``'s takes the other's events (its trace export then crashes the
interpreter, exit 139), and a session of mlprof's opened while the job's is
prepared breaks the job's. So every session start is announced to the
listeners first (the automatic profiler stops for good), whatever order the
two come in.

The hooks sit where every session starts and are looked up at call time:
``torch.autograd.profiler.profile._prepare_trace`` (under
``torch.profiler.profile``, ``_KinetoProfile`` and the autograd profiler alike;
a schedule's action map holds bound methods made when the job built its
profiler, so a hook on ``torch.profiler``'s class would miss a profiler built
earlier) and ``_run_on_profiler_start`` (also ``emit_nvtx``, ``emit_itt``).
They are set as soon as ``torch.autograd.profiler`` is imported, before the
job can prepare a session. This module never imports torch.
"""

from __future__ import annotations

import threading
from typing import Any, Callable

from .import_hooks import after_import

__all__ = ["on_job_profiler_start", "guard_job_profilers", "own_session", "announce_job_profiler"]

_listeners: list[Callable[[], None]] = []
# Set while mlprof's own backend starts its session, on the thread doing it.
_own = threading.local()
_AUTOGRAD_PROFILER = "torch.autograd.profiler"


def on_job_profiler_start(listener: Callable[[], None]) -> None:
    """Call ``listener`` before the job starts a torch profiler session of its own."""
    _listeners.append(listener)


def announce_job_profiler() -> None:
    for listener in list(_listeners):
        listener()


class own_session:  # noqa: N801 - used as a context manager
    """mlprof's own calls into torch's session start, which the hooks let through."""

    def __enter__(self) -> None:
        self.previous = getattr(_own, "active", False)
        _own.active = True

    def __exit__(self, *exc: object) -> None:
        _own.active = self.previous


def _announcing(original: Callable[..., Any]) -> Callable[..., Any]:
    def hooked(*args: Any, **kwargs: Any) -> Any:  # noqa: ANN401
        if not getattr(_own, "active", False):
            announce_job_profiler()
        return original(*args, **kwargs)

    hooked._mlprof_guard = True  # type: ignore[attr-defined]
    hooked.__wrapped__ = original  # type: ignore[attr-defined]
    return hooked


def _guard(module: Any) -> None:  # noqa: ANN401 - torch.autograd.profiler
    cls = module.profile
    if getattr(cls._prepare_trace, "_mlprof_guard", False):
        return
    cls._prepare_trace = _announcing(cls._prepare_trace)
    module._run_on_profiler_start = _announcing(module._run_on_profiler_start)


def guard_job_profilers() -> None:
    """Hook torch's session start now if torch is imported, else as soon as it is."""
    after_import(_AUTOGRAD_PROFILER, _guard)
