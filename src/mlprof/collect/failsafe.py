"""The one guard that keeps profiling from breaking the job it observes.

Every piece of profiler work that runs inside the training job (the
profiler's own steps, a trainer session, a trainer's hook) goes through
:class:`FailSafe`: the first failure is logged, profiling is switched off
(``on_failure`` cleans up, keeping what was written) and every later call
returns ``None`` at once. The training loop goes on. Work whose failure
only drops one thing (a capture, the training scalars) logs it with
:func:`log_failure`, the same one line.
"""

from __future__ import annotations

import functools
import logging
import traceback
from typing import Any, Callable

__all__ = ["FailSafe", "never_raises", "log_failure"]

logger = logging.getLogger("mlprof")


def log_failure(what: str, exc: BaseException, owner: str | None = None,
                consequence: str = "profiling is switched off") -> str:
    """Log a failure of profiler work inside the job: one error line saying what failed, what it costs
    (``consequence``) and that training continues; the traceback at debug level. Returns ``what: error``."""
    error = f"{what}: {type(exc).__name__}: {exc}"
    consequence = f"{consequence}, training continues" if consequence else "training continues"
    if owner:
        logger.error("mlprof: %s failed in %s (%s: %s); %s", owner, what, type(exc).__name__, exc, consequence)
    else:
        logger.error("mlprof: %s; %s", error, consequence)
    logger.debug("mlprof failure details:\n%s", traceback.format_exc())
    return error


class FailSafe:
    """Runs profiler work so that its failures switch profiling off instead of raising.

    ``owner`` names who failed in the log line ("the Trainer integration",
    "MlprofCallback"); without it the line starts with what failed.
    """

    def __init__(self, on_failure: Callable[[], None], owner: str | None = None) -> None:
        self.failed = False
        self.error: str | None = None
        self._on_failure = on_failure
        self._owner = owner

    def run(self, what: str, func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        if self.failed:
            return None
        try:
            return func(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - the training job must go on
            self.failed = True
            self.error = log_failure(what, exc, self._owner)
            try:
                self._on_failure()
            except Exception:  # noqa: BLE001
                logger.debug("mlprof cleanup after failure failed:\n%s", traceback.format_exc())
            return None


def never_raises(method: Callable) -> Callable:
    """A method run through its object's :class:`FailSafe` (made on first use; on failure the
    object's ``session``, if any, is stopped)."""

    @functools.wraps(method)
    def guarded(self: Any, *args: Any, **kwargs: Any) -> Any:
        failsafe = self.__dict__.get("_failsafe")
        if failsafe is None:
            def stop_session() -> None:
                session = getattr(self, "session", None)
                if session is not None:
                    session.stop()
            failsafe = self.__dict__["_failsafe"] = FailSafe(stop_session, owner=type(self).__name__)
        return failsafe.run(method.__name__, method, self, *args, **kwargs)

    return guarded
