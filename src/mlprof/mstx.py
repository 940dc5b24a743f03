"""Markers (the Ascend PyTorch Profiler's msprof_tx / mstx): points and ranges on the timeline.

    mlprof.mstx.mark("epoch start")
    rid = mlprof.mstx.range_start("dataloader")
    ...
    mlprof.mstx.range_end(rid)

    with mlprof.mstx.range("forward"):
        ...

    @mlprof.mstx.range("eval")
    def evaluate(): ...

While no capture window is being recorded each call costs one global lookup
(and ``range_start`` one counter increment). Markers are recorded at every
profiler level, Level_none included, when ``ExperimentalConfig.mstx`` is on.
With a CUDA ``stream``, the range is also timed on that stream with CUDA
events, so it shows on the device timeline too.
"""

from __future__ import annotations

import functools
import itertools
import threading
import time
from typing import Any, Callable, TypeVar

from .collect import recorder as _recorder

__all__ = ["mark", "range_start", "range_end", "range"]

_F = TypeVar("_F", bound=Callable[..., Any])
_next_id = itertools.count(1).__next__


def mark(message: str) -> None:
    """Record an instant marker."""
    rec = _recorder._active
    if rec is None:
        return
    rec.marks.append({"name": str(message), "ts_ns": time.time_ns(), "tid": threading.get_native_id()})


def range_start(message: str, stream: Any = None) -> int:
    """Open a range and return its id, to pass to :func:`range_end`."""
    range_id = _next_id()
    rec = _recorder._active
    if rec is None:
        return range_id
    opened = _recorder.OpenRange(range_id, str(message), time.time_ns(), threading.get_native_id(), stream)
    if stream is not None:
        rec.device_timer().start(opened)
    _recorder._open_ranges[range_id] = opened
    return range_id


def range_end(range_id: int) -> None:
    """Close a range opened by :func:`range_start`; unknown ids are ignored."""
    opened = _recorder._open_ranges.pop(range_id, None)
    rec = _recorder._active
    if opened is None or rec is None:
        return
    record = _recorder.range_record(opened, time.time_ns(), threading.get_native_id())
    if opened.stream is not None:
        rec.device_timer().end(opened, record)
    rec.ranges.append(record)


class range:  # noqa: N801 - mirrors torch_npu's mstx.range; shadows the builtin only here
    """A range as a context manager or a decorator."""

    def __init__(self, message: str, stream: Any = None) -> None:
        self.message = message
        self.stream = stream
        self._ids: list[int] = []

    def __enter__(self) -> "range":
        self._ids.append(range_start(self.message, self.stream))
        return self

    def __exit__(self, *exc: object) -> None:
        range_end(self._ids.pop())

    def __call__(self, func: _F) -> _F:
        message, stream = self.message, self.stream

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            range_id = range_start(message, stream)
            try:
                return func(*args, **kwargs)
            finally:
                range_end(range_id)

        return wrapper  # type: ignore[return-value]
