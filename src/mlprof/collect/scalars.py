"""Training scalars beside the profile: ``mlprof.log_scalar(name, value, step=None)``.

Loss, learning rate, throughput and the like are kept for the whole profiling
session (not only inside capture windows: a loss curve needs every logged
step) and written into the capture as segments (``scalars/segment_NNNN.json``,
docs/capture_format.md): each segment holds the values logged since the
previous one and is written once, atomically, when a window is saved, when
50,000 values are waiting, and when profiling stops. A killed job keeps every
segment written before it died.

While no session is recording, ``log_scalar`` costs one global lookup. It
never raises into the training loop: a value that is not a number is skipped
with one warning per name. Nothing here imports torch (a tensor is turned into
a number with ``float()``, which waits for a CUDA tensor's value).
"""

from __future__ import annotations

import logging
import math
import operator
import time
from pathlib import Path
from typing import Any, Callable

from ..capture import layout
from ..capture.files import make_private_dir, write_json_atomic
from .failsafe import log_failure

__all__ = ["ScalarLog", "log_scalar", "record_scalars", "active_log", "MAX_ROWS", "SOURCE_USER"]

logger = logging.getLogger("mlprof")

# Values kept per capture; later ones are counted as dropped (a runaway logging
# loop must not fill the disk or the job's memory).
MAX_ROWS = 1_000_000
# Values waiting in memory before a segment is written between windows.
FLUSH_ROWS = 50_000
MAX_NAME_CHARS = 200
SOURCE_USER = "user"


class ScalarLog:
    """The scalars of one capture: a buffer of rows and the segments written so far."""

    def __init__(self, capture_dir: Path, current_step: Callable[[], int | None]) -> None:
        self.dir = capture_dir / layout.SCALARS_DIR
        self._current_step = current_step
        # The rows of the next ScalarsSegment (capture.records), built at flush: here only a tuple per value.
        self._rows: list[tuple[str, int | None, int, float | None, str]] = []
        self._kept = 0
        self._dropped = 0
        self._segments = 0
        self._warned: set[str] = set()
        self.broken = False

    # -- recording (training thread) ---------------------------------------------
    def add(self, name: Any, value: Any, step: Any, source: str) -> None:
        if self.broken:
            return
        clean = _clean_name(name)
        if clean is None:
            self._warn_once("<bad name>", f"log_scalar: the name must be a non-empty string, got {name!r:.80}")
            return
        name = clean
        number = _number(value)
        if number is _BAD:
            self._warn_once(name, f"log_scalar({name!r}): {type(value).__name__} is not a number; skipped")
            return
        if step is None:
            step = self._current_step()
        else:
            try:
                step = operator.index(step)
            except TypeError:
                self._warn_once(name, f"log_scalar({name!r}): step {step!r} is not an integer; skipped")
                return
            if isinstance(step, bool) or not 0 <= step < 2**62:
                self._warn_once(name, f"log_scalar({name!r}): step {step!r} is out of range; skipped")
                return
        if self._kept >= MAX_ROWS:
            self._dropped += 1
            return
        self._kept += 1
        self._rows.append((name, step, time.time_ns(), number, source))
        if len(self._rows) >= FLUSH_ROWS:
            try:
                self.flush()
            except Exception as exc:  # noqa: BLE001 - a full disk must not stop training
                self.broken = True
                log_failure("writing the training scalars", exc, consequence="they are no longer recorded")

    def _warn_once(self, key: str, message: str) -> None:
        if key not in self._warned:
            self._warned.add(key)
            logger.warning("mlprof: %s", message)

    # -- writing -------------------------------------------------------------------
    def flush(self) -> Path | None:
        """Write the waiting rows as the next segment (nothing when none wait)."""
        if not self._rows and not self._dropped:
            return None
        # Here, not at the top: `import mlprof` (log_scalar) stays free of msgspec.
        from ..capture.records import ScalarsSegment

        rows, self._rows = self._rows, []
        dropped, self._dropped = self._dropped, 0
        make_private_dir(self.dir)
        path = self.dir / layout.scalars_segment_name(self._segments)
        write_json_atomic(path, ScalarsSegment(rows=rows, dropped=dropped))
        self._segments += 1
        return path

    @property
    def segments_written(self) -> int:
        return self._segments


class _Bad:
    pass


_BAD = _Bad()


def _clean_name(name: Any) -> str | None:
    if not isinstance(name, str) or not name.strip():
        return None
    return name.strip()[:MAX_NAME_CHARS]


def _number(value: Any) -> float | None | _Bad:
    """A float, None for NaN/inf (kept as NULL), or _BAD for what is not a number."""
    if isinstance(value, (bool, str, bytes)) or value is None:
        return _BAD
    try:
        # A loss tensor still attached to its graph: read its value without torch's warning.
        detach = getattr(value, "detach", None)
        number = float(detach() if callable(detach) else value)
    except (TypeError, ValueError, RuntimeError):  # RuntimeError: a tensor of several values
        return _BAD
    return number if math.isfinite(number) else None


# The scalar log of the session now recording, if any: log_scalar reads this one
# global so that it costs a single lookup while nothing records.
_active: ScalarLog | None = None


def activate(log: ScalarLog) -> None:
    global _active
    _active = log


def deactivate(log: ScalarLog | None) -> None:
    global _active
    if log is not None and _active is log:
        _active = None


def active_log() -> ScalarLog | None:
    return _active


def log_scalar(name: str, value: Any, step: int | None = None) -> None:
    """Record a training scalar (loss, learning rate, samples/s, ...) in the capture being written.

    ``step`` defaults to the profiler's current step. Recorded while an
    ``mlprof.profile`` writing a capture (``tensorboard_trace_handler``), a
    trainer integration or ``mlprof run`` is running, windows or not; otherwise
    a no-op. Values that are not numbers are skipped with one warning per name;
    NaN and infinities are kept as NULL.
    """
    log = _active
    if log is not None:
        log.add(name, value, step, SOURCE_USER)


def record_scalars(values: dict[str, Any], step: int | None, source: str) -> None:
    """Record several values logged together by a trainer (its own ``source`` name)."""
    log = _active
    if log is None:
        return
    for name, value in values.items():
        # A trainer's logs may hold text (a run name): only numbers are scalars, quietly.
        if _number(value) is not _BAD:
            log.add(name, value, step, source)
