"""Builders of tiny Kineto traces for the tests, defined once (six modules had their own BASE_NS, five an X()).

Importable as ``trace_events`` because pytest puts tests/ on sys.path (as ``shared_data``).
"""

from __future__ import annotations

# The traces' baseTimeNanoseconds: a 2023 wall clock, so times are realistic int64 nanoseconds.
BASE_NS = 1_700_000_000_000_000_000


def X(name: str, ts: float, dur: float, cat: str = "cpu_op", pid: int = 10, tid: int = 11, **args) -> dict:
    """A complete ("X") event, times in µs; ``args`` keys with underscores read as Kineto's spaced ones
    (``input_dims=`` is "input dims"; pass ``**{"Input Dims": ...}`` for Kineto's capitals)."""
    ev = {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur}
    if args:
        ev["args"] = {k.replace("_", " "): v for k, v in args.items()}
    return ev
