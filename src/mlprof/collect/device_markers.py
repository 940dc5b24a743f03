"""Device-side timing of mstx ranges given a CUDA stream.

Each range records a pair of CUDA events on its stream. At window end the
events are read back relative to one anchor event whose host time is known,
which puts the device times on the same wall clock as everything else.
"""

from __future__ import annotations

import time
from typing import Any

import torch


class DeviceRangeTimer:
    def __init__(self) -> None:
        self._anchor: Any = None
        self._anchor_wall_ns = 0
        self._events: dict[int, tuple[Any, Any]] = {}

    def _ensure_anchor(self, stream: Any) -> None:
        if self._anchor is None:
            # One synchronisation per window, on its first device range only.
            self._anchor = torch.cuda.Event(enable_timing=True)
            self._anchor.record(stream)
            self._anchor.synchronize()
            self._anchor_wall_ns = time.time_ns()

    def start(self, opened: Any) -> None:
        self._ensure_anchor(opened.stream)
        event = torch.cuda.Event(enable_timing=True)
        event.record(opened.stream)
        opened.device_start = event

    def end(self, opened: Any, record: dict[str, Any]) -> None:
        event = torch.cuda.Event(enable_timing=True)
        event.record(opened.stream)
        self._events[record["id"]] = (opened.device_start, event)

    def resolve(self, ranges: list[dict[str, Any]]) -> None:
        for record in ranges:
            pair = self._events.get(record["id"])
            if pair is None:
                continue
            start, end = pair
            end.synchronize()
            record["device_start_ns"] = self._anchor_wall_ns + int(self._anchor.elapsed_time(start) * 1e6)
            record["device_end_ns"] = self._anchor_wall_ns + int(self._anchor.elapsed_time(end) * 1e6)
