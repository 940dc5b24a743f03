"""Grow a real Kineto trace to N events by repeating its steps, shifted in time.

Large benchmark traces (4M, 10M events) cannot be profiled in reasonable
time on a small machine; they are made from a real training-loop trace
(``benchmarks/parse.py`` makes one with torch) by appending copies of all its
non-metadata events, each copy shifted by the trace's span so the steps
follow one another. Step numbers (``ProfilerStep#N``), flow ids, correlation
ids and External ids are renumbered per copy, so steps, flows and each
kernel's launch stay unique. The output is written
as it is made, never held whole.

    python benchmarks/replicate_trace.py SRC.json OUT.json --events 4000000
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import msgspec

_Top = msgspec.defstruct("_Top", [("traceEvents", list[msgspec.Raw], []),
                                  ("baseTimeNanoseconds", int | None, None)])
_TS = re.compile(rb'("ts"\s*:\s*)(-?[0-9.]+)|("(?:id|correlation|External id)"\s*:\s*)(\d+)|(ProfilerStep#)(\d+)')
_META = re.compile(rb'"ph"\s*:\s*"M"')
_TS_ONLY = re.compile(rb'"ts"\s*:\s*(-?[0-9.]+)')


def replicate(src: Path, out: Path, target_events: int) -> int:
    """Write ``out`` with at least ``target_events`` events; returns the count written."""
    top = msgspec.json.decode(src.read_bytes(), type=_Top)
    events = top.traceEvents
    meta = [bytes(r) for r in events if _META.search(r)]
    body = [bytes(r) for r in events if not _META.search(r)]
    del events
    times = [float(m.group(1)) for r in body for m in [_TS_ONLY.search(r)] if m]
    span_us = (max(times) - min(times)) * 1.001 + 1000.0
    steps = {int(m) for r in body for m in re.findall(rb"ProfilerStep#(\d+)", r)}
    step_span = (max(steps) - min(steps) + 1) if steps else 0
    copies = max(1, -(-max(0, target_events - len(meta)) // max(1, len(body))))
    tmp = out.with_name(f".{out.name}.tmp")
    written = len(meta)
    with open(tmp, "wb") as fh:
        head = b'{"schemaVersion": 1, "deviceProperties": [], '
        if top.baseTimeNanoseconds is not None:
            head += b'"baseTimeNanoseconds": %d, ' % top.baseTimeNanoseconds
        fh.write(head + b'"traceEvents": [\n' + b",\n".join(meta))
        for k in range(copies):
            shift, id_add, step_add = k * span_us, k * 10**9, k * step_span

            def sub(m: re.Match) -> bytes:
                if m.group(1):
                    return m.group(1) + b"%.3f" % (float(m.group(2)) + shift)
                if m.group(3):
                    return m.group(3) + b"%d" % (int(m.group(4)) + id_add)
                return m.group(5) + b"%d" % (int(m.group(6)) + step_add)

            for at in range(0, len(body), 50_000):
                piece = b",\n".join(body[at:at + 50_000])
                fh.write(b",\n" + (_TS.sub(sub, piece) if k else piece))
            written += len(body)
        fh.write(b'\n], "traceName": "%s", "displayTimeUnit": "ms"}\n' % src.name.encode())
    tmp.replace(out)
    return written


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("src", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--events", type=int, required=True)
    args = ap.parse_args(argv)
    n = replicate(args.src, args.out, args.events)
    print(f"{args.out}: {n:,} events ({args.out.stat().st_size / 2**20:,.0f} MiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
