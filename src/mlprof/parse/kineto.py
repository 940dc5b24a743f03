"""Parser of Kineto / Chrome-trace JSON (plain or gzip) into table columns.

This is the hot path. The file is decoded in two passes with msgspec: first
the top level, with every event kept as ``msgspec.Raw`` (a slice of the input,
no Python dicts), then the events in chunks into typed structs whose ``args``
hold only the keys the tables use. Each chunk is turned straight into numpy
column arrays, and repeated strings (op names, shapes) become integer codes in
one :class:`StringPool`, so memory stays near the size of the file and there
is no long-lived Python object per event.
"""

from __future__ import annotations

import gc
import gzip
import re
import zlib
from collections.abc import Callable
from functools import partial
from pathlib import Path

import msgspec
import numpy as np

from mlprof.errors import TraceFormatError
from mlprof.parse.kineto_events import (
    EVENTS_DECODER, FLOW_END, FLOW_START, MISSING, Accumulator, KinetoColumns, StringPool, split_chunk,
    _LIST_DECODER, _TOP_DECODER, _TopLevel)
from mlprof.parse.workers import abandon_part, finish_part, start_part, worker_count

__all__ = ["KinetoColumns", "StringPool", "read_kineto", "MISSING", "FLOW_START", "FLOW_END"]

# Events decoded per msgspec call: small enough to stay in cache.
_CHUNK_EVENTS = 10_000


def _read_bytes(path: Path) -> bytes:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise TraceFormatError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as exc:
            raise TraceFormatError(f"{path}: corrupt or truncated gzip data ({exc})") from None
    if not data or data.isspace():
        raise TraceFormatError(f"{path}: empty file, not a Kineto/Chrome trace")
    return data


_LEADING_SPACE = re.compile(rb"\s*")
_AT_INDEX = re.compile(r"\$\[(\d+)\]")


def _decode_error(path: Path, exc: Exception, first_index: int = 0) -> TraceFormatError:
    msg = str(exc)
    if first_index:
        # Chunks are decoded on their own: report the event's index in the file.
        msg = _AT_INDEX.sub(lambda m: f"$.traceEvents[{int(m.group(1)) + first_index}]", msg, count=1)
    else:
        msg = msg.replace("$[", "$.traceEvents[")
    if "truncated" in msg.lower():
        msg = f"truncated JSON ({msg})"
    return TraceFormatError(f"{path}: not a valid Kineto trace: {msg}")


def read_kineto(
    path: Path,
    pool: StringPool,
    progress: Callable[[int, int], None] | None = None,
) -> KinetoColumns:
    """Decode one Kineto trace file into :class:`KinetoColumns`.

    Raises :class:`TraceFormatError` naming the file and the problem for an
    empty, truncated, non-JSON or wrongly typed trace. Event kinds the tables
    do not model are counted in ``unknown``, never fatal.
    """
    path = Path(path)
    # Millions of short-lived objects would trigger the cyclic GC over and over;
    # none of them can form a cycle.
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _read(path, pool, progress)
    finally:
        if gc_was_enabled:
            gc.enable()


def _read(path: Path, pool: StringPool, progress) -> KinetoColumns:
    data = _read_bytes(path)
    try:
        first_char = _LEADING_SPACE.match(data).end()
        if data[first_char:first_char + 1] == b"[":
            top = _TopLevel(traceEvents=_LIST_DECODER.decode(data))
        else:
            top = _TOP_DECODER.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise _decode_error(path, exc) from None
    base_ns = top.baseTimeNanoseconds or 0
    cols = KinetoColumns(base_time_ns=base_ns)
    for key in _TopLevel.__struct_fields__[2:]:
        raw = getattr(top, key)
        if raw:
            cols.metadata[key] = bytes(raw)
    if top.baseTimeNanoseconds is not None:
        cols.metadata["baseTimeNanoseconds"] = str(base_ns).encode()
    raws = top.traceEvents
    del top
    total = len(raws)
    cols.event_count = total
    accs = _new_accumulators()
    # Contiguous ranges of whole chunks; part 0 runs here, the others forked.
    chunks = -(-total // _CHUNK_EVENTS)
    n_parts = max(1, min(worker_count(total), chunks))
    bounds = [min(total, (chunks * i // n_parts) * _CHUNK_EVENTS) for i in range(n_parts + 1)]
    children = []
    try:
        for i in range(1, n_parts):
            first, last = bounds[i], bounds[i + 1]
            children.append(start_part(partial(_decode_part, path, raws, first, last, base_ns)))
        share = n_parts  # progress: the other parts run alongside this one

        def own_progress(done: int) -> None:
            if progress is not None:
                progress(min(done * share, total - 1) if n_parts > 1 else done, total)

        _decode_range(path, raws, bounds[0], bounds[1], base_ns, pool, cols, accs, own_progress)
        # Free the file text before the columns are concatenated (peak memory).
        del raws, data
        for child in children:
            _merge_part(finish_part(child), pool, cols, accs)
    except BaseException:
        for child in children:
            abandon_part(child)
        raise
    if progress is not None:
        progress(total, total)
    for name, acc in accs.items():
        setattr(cols, name, acc.result())
    return cols


_ACCUMULATED = ("host", "runtime", "device", "collectives", "flows", "memory", "instants",
                "device_annotations", "counters")


def _new_accumulators() -> dict[str, Accumulator]:
    return {name: Accumulator() for name in _ACCUMULATED}


def _decode_range(path, raws, first, last, base_ns, pool, cols, accs, progress) -> None:
    for start in range(first, last, _CHUNK_EVENTS):
        end = min(start + _CHUNK_EVENTS, last)
        chunk_raws = raws[start:end]
        try:
            events = EVENTS_DECODER.decode(b"[" + b",".join(chunk_raws) + b"]")
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise _decode_error(path, exc, start) from None
        try:
            split_chunk(events, chunk_raws, base_ns, pool, cols, accs)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise TraceFormatError(f"{path}: not a valid Kineto trace: counter args: {exc}") from None
        del chunk_raws, events
        if progress is not None:
            progress(end)


def _decode_part(path, raws, first, last, base_ns) -> dict:
    """A forked worker's share: its own string pool and columns, made picklable."""
    pool = StringPool()
    cols = KinetoColumns(base_time_ns=base_ns)
    accs = _new_accumulators()
    _decode_range(path, raws, first, last, base_ns, pool, cols, accs, None)
    return {"strings": pool.keys(), "threads": cols.threads, "unknown": dict(cols.unknown),
            "columns": {name: acc.result() for name, acc in accs.items()}}


def _merge_part(part: dict, pool: StringPool, cols: KinetoColumns, accs) -> None:
    # The worker's string codes -> this pool's codes (int32 columns are codes).
    remap = np.array([pool.code(v) for v in part["strings"]] + [-1], dtype=np.int32)
    device_rows_before = sum(len(a) for a in accs["device"].parts.get("name", ()))
    for name, columns in part["columns"].items():
        if not columns:
            continue
        columns = {k: remap[v] if v.dtype == np.int32 else v for k, v in columns.items()}
        if name == "collectives":
            columns["device_row"] = columns["device_row"] + device_rows_before
        accs[name].add(columns)
    cols.threads.extend(part["threads"])
    cols.unknown.update(part["unknown"])
