"""A validator of the Chrome trace event format, for what mlprof writes.

Checks what makes Perfetto and chrome://tracing misread a file: a missing
``traceEvents`` list, unknown phases, non-numeric or non-finite ``ts``/``dur``,
negative durations, flow ids that are not integers below 2^53, flow starts
without an end, metadata events without a name.
"""

from __future__ import annotations

import math
from pathlib import Path

import msgspec

__all__ = ["validate_chrome_trace", "ChromeTraceProblem"]

_PHASES = set("XBEiIsftMCbenPONDR")
_MAX_ID = 2**53


class ChromeTraceProblem(ValueError):
    pass


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def validate_chrome_trace(path: Path) -> int:
    """Raise :class:`ChromeTraceProblem` at the first problem; return the event count."""
    try:
        doc = msgspec.json.decode(Path(path).read_bytes())
    except msgspec.DecodeError as exc:
        raise ChromeTraceProblem(f"{path}: not JSON: {exc}") from None
    events = doc.get("traceEvents") if isinstance(doc, dict) else doc
    if not isinstance(events, list):
        raise ChromeTraceProblem(f"{path}: no traceEvents list")
    # Viewers sort by ts, so a flow's start and end may come in any file order.
    flow_starts: dict[tuple, int] = {}
    flow_ends: dict[tuple, int] = {}
    for i, ev in enumerate(events):
        where = f"{path}: event {i}"
        if not isinstance(ev, dict):
            raise ChromeTraceProblem(f"{where}: not an object")
        ph = ev.get("ph")
        if ph not in _PHASES:
            raise ChromeTraceProblem(f"{where}: unknown phase {ph!r}")
        for key in ("pid", "tid"):
            if key in ev and not isinstance(ev[key], (int, str)):
                raise ChromeTraceProblem(f"{where}: {key} is {type(ev[key]).__name__}")
        if ph == "M":
            if not isinstance(ev.get("name"), str) or not isinstance(ev.get("args"), dict):
                raise ChromeTraceProblem(f"{where}: metadata event without name/args")
            continue
        if not _number(ev.get("ts")):
            raise ChromeTraceProblem(f"{where}: ts is not a finite number: {ev.get('ts')!r}")
        if ph == "X" and not (_number(ev.get("dur")) and ev["dur"] >= 0):
            raise ChromeTraceProblem(f"{where}: complete event needs a duration >= 0, got {ev.get('dur')!r}")
        if ph in ("s", "t", "f"):
            fid = ev.get("id")
            if not isinstance(fid, int) or isinstance(fid, bool) or not 0 <= fid < _MAX_ID:
                raise ChromeTraceProblem(f"{where}: flow id {fid!r} is not an integer below 2^53")
            key = (ev.get("cat"), fid)
            if ph == "s":
                flow_starts[key] = i
            elif ph == "f":
                flow_ends[key] = i
        if ph == "C" and not isinstance(ev.get("args"), dict):
            raise ChromeTraceProblem(f"{where}: counter without args")
    for key in flow_starts.keys() ^ flow_ends.keys():
        i = flow_starts.get(key, flow_ends.get(key))
        raise ChromeTraceProblem(f"{path}: event {i}: flow {key[1]} has a start or an end but not both")
    return len(events)
