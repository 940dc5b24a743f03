"""A small stderr progress bar for long parses (no dependency)."""

from __future__ import annotations

import sys
import time

__all__ = ["ProgressBar"]


class ProgressBar:
    """Callable as ``bar(label, bytes_read, file_bytes)``; redraws at most 10 times a second.

    :meth:`stage` says what the parse does once the file is read.
    """

    def __init__(self, stream=None, width: int = 30) -> None:
        self.stream = stream or sys.stderr
        self.width = width
        self._last = 0.0
        self._label = None

    def __call__(self, label: str, done: int, total: int) -> None:
        now = time.monotonic()
        finished = done >= total
        if not finished and now - self._last < 0.1 and label == self._label:
            return
        self._last = now
        self._label = label
        frac = done / total if total else 1.0
        filled = int(frac * self.width)
        bar = "#" * filled + "." * (self.width - filled)
        # Bytes of the trace file read (compressed bytes for gzip): the one
        # measure known before the events are counted.
        self.stream.write(f"\rparsing {label} [{bar}] {frac:4.0%} {done / 2**20:,.1f}/{total / 2**20:,.1f} MiB")
        if finished:
            self.stream.write("\n")
        self.stream.flush()

    def stage(self, text: str) -> None:
        """A step of the parse after its file is read (building, writing, attributing): one line each."""
        self.stream.write(f"  {text} ...\n")
        self.stream.flush()
