"""Parser of Kineto / Chrome-trace JSON (plain or gzip) into table columns.

:func:`read_kineto` streams the file block by block
(:mod:`mlprof.parse.kineto_stream`), so memory does not grow with the file.
This module keeps the whole-file reader that the streaming one hands over
to when it cannot decide a file: a layout it does not expect, and every
malformed trace, whose error this reader names exactly (event index and
JSON path). It decodes in two passes with msgspec: first the top level, with
every event kept as ``msgspec.Raw`` (a slice of the input, no Python dicts),
then the events in chunks into typed structs whose ``args`` hold only the
keys the tables use, turned straight into numpy columns with repeated
strings as :class:`StringPool` codes. Plain files are memory-mapped and
their pages dropped from the resident set as chunks are done; large traces
are split between forked worker processes (:mod:`mlprof.parse.workers`).
"""

from __future__ import annotations

import gc
import mmap
import os
import re
import shlex
import tempfile
from collections.abc import Callable
from functools import partial
from pathlib import Path

import msgspec
import numpy as np

from mlprof.errors import CaptureError, MlprofError, TraceFormatError
from mlprof.parse.kineto_events import (
    EVENTS_DECODER, FLOW_END, FLOW_START, LIST_DECODER, MISSING, TOP_DECODER, Accumulator, KinetoColumns,
    StringPool, TopLevel, first_bad_field, split_chunk)
from mlprof.parse.kineto_ranges import read_ranges
from mlprof.parse.spill import Spill, SpilledTrace
from mlprof.parse.kineto_cuts import BAD_INPUT
from mlprof.parse.kineto_stream import NotStreamable, read_stream
from mlprof.parse.trace_blocks import gunzip_blocks
from mlprof.parse.workers import abandon_part, finish_part, start_part, worker_count

__all__ = ["KinetoColumns", "StringPool", "read_kineto", "MISSING", "FLOW_START", "FLOW_END"]

# Events decoded per msgspec call: small enough to stay in cache.
_CHUNK_EVENTS = 10_000
# Chunks between two drops of the mapped file's pages from the resident set.
_RELEASE_EVERY = 8


class _FileText:
    """The trace's JSON text: a read-only mapping of a plain file, or gunzipped bytes.

    A mapped file's pages belong to the page cache: :meth:`release` drops
    them from this process's resident set (they fault back in cheaply when
    touched), so a 400 MB trace does not stay 400 MB of RSS while its events
    are decoded chunk by chunk.
    """

    def __init__(self, path: Path) -> None:
        self._mm: mmap.mmap | None = None
        try:
            with open(path, "rb") as fh:
                magic = fh.read(2)
                size = os.fstat(fh.fileno()).st_size
                if magic == b"\x1f\x8b":
                    fh.seek(0)
                    self._mm = _gunzip_to_map(path, fh, size)
                    self.data = self._mm if self._mm is not None else b""
                elif size == 0:
                    self.data = b""
                else:
                    self._mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
                    self.data = self._mm
        except OSError as exc:
            raise CaptureError(f"{path}: cannot read: {exc.strerror or exc}") from None  # unreadable input: exit 3
        end = _LEADING_SPACE.match(self.data).end()
        if end == len(self.data):
            self.close()
            raise TraceFormatError(f"{path}: empty file, not a Kineto/Chrome trace")
        self.first_char = self.data[end:end + 1]


    def release(self) -> None:
        if self._mm is not None and hasattr(mmap, "MADV_DONTNEED"):
            self._mm.madvise(mmap.MADV_DONTNEED)

    def close(self) -> None:
        self.data = b""
        if self._mm is not None:
            try:
                self._mm.close()
            except BufferError:  # a Raw slice is still referenced somewhere; GC closes it
                pass
            self._mm = None


def _gunzip_to_map(path: Path, fh, size: int) -> mmap.mmap | None:
    """Stream-decompress a gzip file (all members, under the caps of
    :func:`gunzip_blocks`) into an unlinked temporary file and map it, so
    memory stays that of a plain mapped trace."""
    out = tempfile.TemporaryFile(prefix="mlprof_gunzip_")
    try:
        written = 0
        for piece, _ in gunzip_blocks(path, fh, size, _GZIP_PIECE):
            out.write(piece)
            written += len(piece)
        out.flush()
        if written == 0:
            return None
        return mmap.mmap(out.fileno(), 0, access=mmap.ACCESS_READ)
    except OSError as exc:
        raise MlprofError(f"{path}: cannot decompress to a temporary file: {exc.strerror or exc}") from None
    finally:
        out.close()  # the mapping keeps the (already unlinked) data alive


_GZIP_PIECE = 4 * 2**20
_LEADING_SPACE = re.compile(rb"\s*")
_AT_INDEX = re.compile(r"\$\[(\d+)\]")


# msgspec's words for the limits the event struct sets, said as the other problems are: "PATH: problem".
_TOO_LONG = re.compile(r"Expected `str` of length <= (\d+) - at `([^`]*)`")
_NO_FIELD = re.compile(r"Object missing required field `(\w+)` - at `([^`]*)`")


def _decode_error(path: Path, exc: Exception, first_index: int = 0) -> TraceFormatError:
    msg = _TOO_LONG.sub(lambda m: f"{m.group(2)}: a string of more than {int(m.group(1)):,} characters", str(exc))
    msg = _NO_FIELD.sub(lambda m: f"{m.group(2)}.{m.group(1)}: missing", msg)
    if first_index:
        # Chunks are decoded on their own: report the event's index in the file.
        msg = _AT_INDEX.sub(lambda m: f"$.traceEvents[{int(m.group(1)) + first_index}]", msg, count=1)
    else:
        msg = msg.replace("$[", "$.traceEvents[")
    if "truncated" in msg.lower():
        msg = f"truncated JSON ({msg})"
    return TraceFormatError(f"{path}: not a valid Kineto trace: {msg}")


_BAD_INPUT = BAD_INPUT


def _input_problem(exc: BaseException) -> str:
    if isinstance(exc, UnicodeDecodeError):
        return "invalid UTF-8 text"
    if isinstance(exc, RecursionError):
        return "JSON nested too deep"
    return str(exc)


def _what_json_is(data) -> str:
    """Name the kind of a JSON object that has no traceEvents (refused by name)."""
    try:
        keys = set(msgspec.json.decode(data, type=dict[str, msgspec.Raw]))
    except (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError, RecursionError):
        return "a JSON object"
    if {"nodes", "schema"} <= keys:
        return "a PyTorch Execution Trace (execution graph observer output)"
    if not keys:
        return "an empty JSON object"
    if "schema_version" in keys and "windows" in keys:
        return "an mlprof capture manifest (profiler_info.json; parse its directory)"
    return f"a JSON object with keys {', '.join(sorted(keys)[:5])}"


def _bad_event(path: Path, raws, start: int, exc: BaseException) -> TraceFormatError:
    """The error of a chunk that failed, naming the first bad event's JSON path."""
    if isinstance(exc, (msgspec.DecodeError, msgspec.ValidationError)):
        return _decode_error(path, exc, start)
    for i, raw in enumerate(raws):
        where = f"$.traceEvents[{start + i}]"
        try:
            problem = first_bad_field(bytes(raw))
        except (UnicodeDecodeError, RecursionError) as inner:
            return TraceFormatError(f"{path}: not a valid Kineto trace: {where}: {_input_problem(inner)}")
        if problem is not None:
            return TraceFormatError(f"{path}: not a valid Kineto trace: {where}{problem}")
    return TraceFormatError(f"{path}: not a valid Kineto trace: {_input_problem(exc)} "
                            f"(in $.traceEvents[{start}:{start + len(raws)}])")


def read_kineto(
    path: Path,
    pool: StringPool,
    progress: Callable[[int, int], None] | None = None,
    memory_budget_bytes: int | None = None,
    spill: Spill | None = None,
) -> KinetoColumns | SpilledTrace:
    """Decode one Kineto trace file into :class:`KinetoColumns`.

    ``progress(bytes_read, file_bytes)`` is called as the file is read (for
    gzip, compressed bytes). The file is streamed in blocks sized from
    ``memory_budget_bytes`` (:mod:`mlprof.parse.kineto_stream`); a file the
    streaming reader cannot decide, malformed ones included, is read whole,
    which names the problem.

    With ``spill``, the decoded pieces go to disk and a :class:`SpilledTrace` comes
    back (:mod:`mlprof.parse.segments`), except from the whole-file reader.

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
        try:
            try:
                return read_ranges(path, pool, progress, spill)
            except NotStreamable:  # compressed, or no trusted gap: read through this process
                if spill is not None:
                    spill.remove()  # what the first reader spilled: the second numbers its pieces anew
                return read_stream(path, pool, progress, memory_budget_bytes, spill)
        except NotStreamable:
            return _read(path, pool, _bytes_progress(path, progress))
    except TraceFormatError:
        if path.suffix.lower() in _SCRIPT_SUFFIXES:
            raise TraceFormatError(script_given(path)) from None
        raise
    finally:
        if gc_was_enabled:
            gc.enable()


_SCRIPT_SUFFIXES = (".py", ".pyw")


def script_given(path: Path) -> str:
    """The error for a training script given where a trace or capture belongs: how to profile it instead."""
    return (f"{path}: a Python script, not a trace or capture; to profile it: "
            f"mlprof run --output ./result -- python {shlex.quote(str(path))}, then: mlprof advise ./result")


def _bytes_progress(path: Path, progress):
    """The whole-file reader counts events: report them as the file's bytes, like the streaming one."""
    if progress is None:
        return None
    try:
        size = path.stat().st_size
    except OSError:
        return None
    return lambda done, total: progress(size * done // max(total, 1), size)


def _read(path: Path, pool: StringPool, progress) -> KinetoColumns:
    text = _FileText(path)
    try:
        return _decode_text(path, text, pool, progress)
    finally:
        text.close()


def _decode_text(path: Path, text: _FileText, pool: StringPool, progress) -> KinetoColumns:
    try:
        if text.first_char == b"[":
            top = TopLevel(traceEvents=LIST_DECODER.decode(text.data))
        else:
            top = TOP_DECODER.decode(text.data)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise _decode_error(path, exc) from None
    except (UnicodeDecodeError, RecursionError) as exc:
        raise TraceFormatError(f"{path}: not a valid Kineto trace: $: {_input_problem(exc)}") from None
    if top.traceEvents is None:
        raise TraceFormatError(f"{path}: {_what_json_is(text.data)}, not a Kineto/Chrome trace (no traceEvents)")
    text.release()
    base_ns = top.baseTimeNanoseconds or 0
    if not 0 <= base_ns < 2**62:
        raise TraceFormatError(f"{path}: not a valid Kineto trace: baseTimeNanoseconds {base_ns} is out of range")
    cols = KinetoColumns(base_time_ns=base_ns)
    for key in TopLevel.__struct_fields__[2:]:
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
            children.append(start_part(partial(_decode_part, path, raws, first, last, base_ns, text)))
        share = n_parts  # progress: the other parts run alongside this one

        def own_progress(done: int) -> None:
            if progress is not None:
                progress(min(done * share, total - 1) if n_parts > 1 else done, total)

        _decode_range(path, raws, bounds[0], bounds[1], base_ns, pool, cols, accs, own_progress, text)
        # Free the file text before the columns are concatenated (peak memory).
        del raws
        text.close()
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


def _decode_range(path, raws, first, last, base_ns, pool, cols, accs, progress, text=None) -> None:
    for n, start in enumerate(range(first, last, _CHUNK_EVENTS)):
        if text is not None and n % _RELEASE_EVERY == _RELEASE_EVERY - 1:
            text.release()
        end = min(start + _CHUNK_EVENTS, last)
        chunk_raws = raws[start:end]
        try:
            events = EVENTS_DECODER.decode(b"[" + b",".join(chunk_raws) + b"]")
            split_chunk(events, chunk_raws, base_ns, pool, cols, accs)
        except _BAD_INPUT as exc:
            raise _bad_event(path, chunk_raws, start, exc) from None
        del chunk_raws, events
        if progress is not None:
            progress(end)


def _decode_part(path, raws, first, last, base_ns, text) -> dict:
    """A forked worker's share: its own string pool and columns, made picklable."""
    pool = StringPool()
    cols = KinetoColumns(base_time_ns=base_ns)
    accs = _new_accumulators()
    _decode_range(path, raws, first, last, base_ns, pool, cols, accs, None, text)
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
