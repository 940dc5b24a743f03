"""mlprof's own events (steps, markers, GC) as Chrome-trace events.

Used by ``export_chrome_trace``, so that a trace exported by hand shows what
mlprof recorded next to torch's events. (Captures keep them in their own
files; the parser merges them into trace_view.json.) ``files`` is
``HostRecorder.files()``: the window's records of mlprof.capture.records.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

from ..capture.trace_names import gc_event_name, step_event_name

_BASE_RE = re.compile(rb'"baseTimeNanoseconds"\s*:\s*(\d+)')


def host_events(files: dict[str, Any], base_ns: int, pid: int, with_steps: bool) -> list[dict[str, Any]]:
    def us(ns: int) -> float:
        return (ns - base_ns) / 1000.0

    events: list[dict[str, Any]] = []
    if with_steps:
        for step in files["steps"]:
            events.append({"ph": "X", "cat": "step", "name": step_event_name(step.step), "pid": pid,
                           "tid": "steps", "ts": us(step.start_ns), "dur": (step.end_ns - step.start_ns) / 1000.0})
    for mark in files["markers"].marks:
        events.append({"ph": "i", "s": "t", "cat": "mstx", "name": mark.name, "pid": pid, "tid": mark.tid,
                       "ts": us(mark.ts_ns)})
    for rng in files["markers"].ranges:
        if rng.end_ns is None:
            continue
        events.append({"ph": "X", "cat": "mstx", "name": rng.name, "pid": pid, "tid": rng.tid,
                       "ts": us(rng.start_ns), "dur": (rng.end_ns - rng.start_ns) / 1000.0})
    for pause in files["gc"]:
        events.append({"ph": "X", "cat": "gc", "name": gc_event_name(pause.generation), "pid": pid, "tid": pause.tid,
                       "ts": us(pause.start_ns), "dur": pause.dur_ns / 1000.0,
                       "args": {"collected": pause.collected, "uncollectable": pause.uncollectable}})
    return events


def write_host_only_trace(path: str, files: dict[str, Any], pid: int) -> None:
    starts = [s.start_ns for s in files["steps"]] + [m.ts_ns for m in files["markers"].marks]
    base_ns = (min(starts) // 1_000_000_000 * 1_000_000_000) if starts else 0
    with open(path, "w", encoding="utf-8") as out:
        json.dump({"schemaVersion": 1, "baseTimeNanoseconds": base_ns, "displayTimeUnit": "ms",
                   "traceEvents": host_events(files, base_ns, pid, with_steps=True)}, out)


def splice_into_kineto_trace(path: str, files: dict[str, Any], pid: int) -> None:
    """Append mlprof's events to the traceEvents list of a plain JSON trace written by torch."""
    with open(path, "rb") as f:
        head = f.read(4096)
    match = _BASE_RE.search(head)
    base_ns = int(match.group(1)) if match else 0
    events = host_events(files, base_ns, pid, with_steps=False)
    if not events:
        return
    with open(path, "r+b") as f:
        size = f.seek(0, os.SEEK_END)
        tail_len = min(size, 65536)
        f.seek(size - tail_len)
        tail = f.read(tail_len)
        close = tail.rfind(b"]")  # the end of traceEvents: only "traceName" and "}" follow it
        if close < 0 or b"traceEvents" in tail[close:]:
            return
        f.seek(size - tail_len + close)
        rest = tail[close:]
        payload = b"".join(b",\n" + json.dumps(e).encode() for e in events)
        f.write(payload + rest)
