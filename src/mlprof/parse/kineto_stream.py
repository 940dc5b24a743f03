"""Streaming reader of Kineto / Chrome-trace JSON: the file in blocks, never whole.

The text is read (or gunzipped) in blocks of a few MiB. Inside the
``traceEvents`` array the text read so far is cut after its last ``}`` that
a ``,`` follows; msgspec decoding the piece as a JSON list is the proof that
the cut lies between two events (a cut inside a string leaves that string
unterminated, and the decode fails). Each piece is decoded into column
arrays and its text dropped, here or in a forked worker fed through a pipe,
so memory holds a few blocks and the columns, whatever the file's size.
A piece for a worker is cut at the text's last trusted gap instead
(:func:`mlprof.parse.kineto_cuts.trusted_cuts`) and proven by the worker's
own decode, so this process, which also gunzips, does not decode it too.
Plain files are first read by offsets (:mod:`mlprof.parse.kineto_ranges`).

The fast path never decides an error: a layout it does not expect (no
``traceEvents`` key near the start, keys after it that hold objects) and
every malformed event make it give up with :class:`NotStreamable`, and the
caller reads the file whole (:mod:`mlprof.parse.kineto`), which names the
problem exactly as it always has. Only gzip errors (a bomb, a truncated
member) are raised here, by the block reader that both paths share
(:mod:`mlprof.parse.trace_blocks`).
"""

from __future__ import annotations

import os
import re
import select
import struct
from collections.abc import Callable, Iterator
from functools import partial

import msgspec
import numpy as np

from mlprof.errors import CaptureError
from mlprof.parse.kineto_cuts import BAD_INPUT, as_array, decoded_cut, proven_cut, trusted_cuts
from mlprof.parse.kineto_events import (
    EVENTS_DECODER, LIST_DECODER, TOP_DECODER, TS_TEXT_EVENTS_DECODER, Accumulator, KinetoColumns, StringPool, TopLevel,
    split_chunk)
from mlprof.parse.kineto_times import exact_times, exact_ts_ns, exact_ts_of_raws, ts_ns_need_text, ts_texts_to_ns
from mlprof.parse.release_memory import release_freed_memory
from mlprof.parse.spill import Spill, SpilledTrace, as_in_trace, kept
from mlprof.parse.trace_blocks import block_bytes_for, events_in_file, gunzip_blocks, plain_blocks
from mlprof.parse.workers import abandon_part, finish_part, start_part, worker_count

__all__ = ["NotStreamable", "read_stream", "ACCUMULATED", "CHUNK_EVENTS", "columns_of", "load_spilled",
           "take_worker_pieces", "decode_piece", "decode_tail", "find_head"]

# Events decoded per msgspec call: small enough to stay in cache.
CHUNK_EVENTS = 10_000
ACCUMULATED = ("host", "runtime", "device", "collectives", "flows", "memory", "instants",
               "device_annotations", "counters")

# How far into the file the "traceEvents" key is looked for, and the most
# text one event may span before streaming gives up (the whole-file reader
# then decides).
_HEAD_LIMIT = 64 * 2**20
# Text of a piece decoded in the parent: about CHUNK_EVENTS Kineto events.
_LOCAL_PIECE_BYTES = 4 * 2**20
_REST_LIMIT = 256 * 2**20


class NotStreamable(Exception):
    """The streaming path cannot decide this file: read it whole instead."""


# -- the head and the tail of the events array ---------------------------------
_EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')
_CLOSE = re.compile(rb"\s*\]")
_SPACE = re.compile(rb"\s*")


class _Head:
    """Where the events start, and the top-level keys before them."""

    def __init__(self, top: TopLevel | None, events_at: int, bare: bool) -> None:
        self.top, self.events_at, self.bare = top, events_at, bare


def find_head(buf: bytes) -> _Head | None:
    """The head of the text read so far; None: read more. NotStreamable: give up."""
    start = _SPACE.match(buf).end()
    if start == len(buf):
        return None
    if buf[start:start + 1] == b"[":
        return _Head(None, start + 1, True)
    if buf[start:start + 1] != b"{":
        raise NotStreamable
    m = _EVENTS_KEY.search(buf)
    if m is None:
        return None
    try:  # the key is at the top level (not in a string or a nested object)
        top = TOP_DECODER.decode(buf[:m.start()] + b'"traceEvents": []}')
    except BAD_INPUT:
        raise NotStreamable from None
    return _Head(top, m.end(), False)


# -- decoding pieces -------------------------------------------------------------
def decode_piece(text: bytes, base_ns: int, pool: StringPool, raws: list | None = None,
                  events: list | None = None) -> dict:
    """One piece's events -> its columns (per accumulated kind), threads and unknown counts.

    ``text`` is the piece's events, comma-separated; they are decoded straight
    from it, a few MiB at a time (:func:`_parts`), not cut into per-event raw
    text and joined again per chunk. ``events``: the piece's events, already
    decoded. The raw text of each event (``raws``, or decoded from its part's
    text when first needed) is only read for counter events and for times a
    double cannot hold (:mod:`mlprof.parse.kineto_times`).
    """
    cols = KinetoColumns(base_time_ns=base_ns)
    accs = {name: Accumulator() for name in ACCUMULATED}
    if events is not None:
        parts = [(text, events, raws)]
    elif raws is not None:  # already cut into events: decoded whole
        parts = [(text, _decode_events(memoryview(text)), raws)]
    else:
        parts = _parts(text)
    count = 0
    for part_text, part_events, part_raws in parts:
        count += len(part_events)
        lazy = _LazyRaws(part_text, part_raws)
        as_text = bool(part_events) and isinstance(part_events[0].ts, msgspec.Raw)  # decoded with ts as text
        if as_text:
            try:
                ts_ns = ts_texts_to_ns([e.ts for e in part_events])
            except BAD_INPUT:
                raise NotStreamable from None  # the whole-file reader names the event
            exact_times(part_events, ts_ns)
            _TS_AS_TEXT.wanted = ts_ns_need_text(ts_ns)
        for start in range(0, len(part_events), CHUNK_EVENTS):
            stop = start + CHUNK_EVENTS
            try:
                split_chunk(part_events[start:stop], partial(lazy.slice, start, stop), base_ns, pool, cols, accs,
                            partial(lazy.times, start, stop))
            except BAD_INPUT:
                raise NotStreamable from None
        if not as_text:
            _TS_AS_TEXT.wanted = lazy.ts_ns is not None  # its times needed their text
        del part_events
    return {"columns": {name: acc.result() for name, acc in accs.items() if acc.parts},
            "threads": cols.threads, "unknown": cols.unknown, "events": count}


class _LazyRaws:
    """The raw text of a part's events, and their exact ts, decoded when first asked for."""

    def __init__(self, text, raws: list | None) -> None:
        self.text, self.raws = text, raws
        self.ts_ns: list[int] | None = None

    def slice(self, start: int, stop: int) -> list:
        if self.raws is None:
            self.raws = LIST_DECODER.decode(as_array(self.text))
        return self.raws[start:stop]

    def times(self, start: int, stop: int) -> list[int]:
        # One decode of the part's ts texts, not its events' raw text cut and joined again per chunk.
        if self.ts_ns is None:
            self.ts_ns = exact_ts_ns(as_array(self.text)) if self.raws is None else exact_ts_of_raws(self.raws)
        return self.ts_ns[start:stop]


class _TsAsText:
    """Whether this process decodes its next parts with ts as text (:data:`TS_TEXT_EVENTS_DECODER`):
    when the last part's times needed their text, the next part's likely do, and reading it in the
    one decode saves decoding the part again for it (0.4 µs an event). Speed only: either decode
    gives the same columns. Events already decoded (a piece the block reader proved) keep theirs."""

    wanted = False

    def decoder(self):
        return TS_TEXT_EVENTS_DECODER if self.wanted else EVENTS_DECODER


_TS_AS_TEXT = _TsAsText()


def _decode_events(view: memoryview) -> list:
    try:
        return _TS_AS_TEXT.decoder().decode(as_array(view))
    except BAD_INPUT:
        raise NotStreamable from None  # the whole-file reader names the event


def _parts(text: bytes) -> Iterator[tuple[memoryview, list, None]]:
    """A proven piece's events, about ``_LOCAL_PIECE_BYTES`` of text at a time, so memory holds a
    part's events, not a piece's. Each part's decode proves its cut; a part that does not prove
    is decoded with all the rest of the piece."""
    pos, n = 0, len(text)
    while pos < n:
        decoded = (decoded_cut(text, pos, pos + _LOCAL_PIECE_BYTES, _TS_AS_TEXT.decoder())
                   if n - pos > _LOCAL_PIECE_BYTES else None)
        if decoded is None:
            yield memoryview(text)[pos:], _decode_events(memoryview(text)[pos:]), None
            return
        rest_at, events = decoded
        yield memoryview(text)[pos:rest_at - 1], events, None
        pos = rest_at


_HEADER = struct.Struct("<qq")  # piece index (-1: no more), text length


def _read_exact(fd: int, n: int) -> bytes:
    parts, left = [], n
    while left:
        got = os.read(fd, min(left, 2**22))
        if not got:
            raise EOFError
        parts.append(got)
        left -= len(got)
    return b"".join(parts)


def _write_all(fd: int, data) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _worker(me: int, text_fd: int, ready_fd: int, base_ns: int, spill: Spill | None) -> dict:
    """A forked worker: decode the pieces sent to it, say when it wants the next."""
    pool = StringPool()
    pieces = {}
    os.write(ready_fd, bytes([me]))
    while True:
        index, length = _HEADER.unpack(_read_exact(text_fd, _HEADER.size))
        if index < 0:
            break
        try:  # the parent proved the piece; this decode is its own copy of the events
            pieces[index] = kept(spill, index, decode_piece(_read_exact(text_fd, length), base_ns, pool))
        except BAD_INPUT:
            return {"failed": True}
        except NotStreamable:
            return {"failed": True}
        os.write(ready_fd, bytes([me]))
    return {"failed": False, "strings": pool.keys(), "pieces": pieces}


class _Pieces:
    """Hands pieces to idle workers, decodes the others here; results by piece index."""

    def __init__(self, n_workers: int, base_ns: int, pool: StringPool,
                 spill: Spill | None = None) -> None:
        self.base_ns, self.pool, self.spill = base_ns, pool, spill
        self.results: dict[int, dict] = {}
        self.remaps: dict[int, np.ndarray] = {}
        self.count = 0
        self.workers = []
        self.pipes = []
        self.ready_r = self.ready_w = None
        if n_workers > 1:
            self.ready_r, self.ready_w = os.pipe()
            for me in range(n_workers - 1):
                r, w = os.pipe()
                self.workers.append(start_part(partial(_worker, me, r, self.ready_w, base_ns, spill)))
                os.close(r)
                self.pipes.append(w)
        self.owner: dict[int, int] = {}  # piece index -> worker (absent: here)
        self.spare: int | None = None  # a worker found idle and not given a piece yet

    def idle_worker(self) -> int | None:
        """A worker waiting for a piece (its turn is taken: give it one, or set ``spare``)."""
        if self.spare is not None:
            worker, self.spare = self.spare, None
            return worker
        if self.ready_r is None or not select.select([self.ready_r], [], [], 0)[0]:
            return None
        return os.read(self.ready_r, 1)[0]

    def send(self, worker: int, text: bytes) -> None:
        """One piece to a worker, as its text."""
        index = self.count
        self.count += 1
        try:
            _write_all(self.pipes[worker], _HEADER.pack(index, len(text)))
            _write_all(self.pipes[worker], text)
            self.owner[index] = worker
        except OSError:  # the worker died: its error surfaces in finish()
            raise NotStreamable from None

    def here(self, text: bytes, raws: list | None = None, events: list | None = None) -> None:
        """One piece decoded in this process (its events, or their raw text, if already decoded)."""
        index = self.count
        self.count += 1
        self.results[index] = kept(self.spill, index,
                                   decode_piece(text, self.base_ns, self.pool, raws, events))

    def add(self, text: bytes, raws: list) -> None:
        """One piece: its text and its events (decoded as msgspec.Raw), to an idle worker or here."""
        worker = self.idle_worker()
        if worker is not None:
            self.send(worker, text)
        else:
            self.here(text, raws)

    def finish(self) -> list[dict]:
        """Every piece's result in file order, string codes in ``pool``'s numbering."""
        for fd in self.pipes:
            try:
                _write_all(fd, _HEADER.pack(-1, 0))
            except OSError:
                pass
        for k, part in enumerate(self.workers):
            got = finish_part(part)
            self.workers[k] = None
            take_worker_pieces(got, self.pool, self.results, self.remaps)
        self.close()
        return [self.results[i] for i in range(self.count)]

    def close(self) -> None:
        for part in self.workers:
            if part is not None:
                abandon_part(part)
        self.workers = []
        for fd in self.pipes + [self.ready_r, self.ready_w]:
            if fd is not None:
                os.close(fd)
        self.pipes, self.ready_r, self.ready_w = [], None, None


def take_worker_pieces(got: dict, pool: StringPool, results: dict[int, dict], remaps: dict[int, np.ndarray]) -> None:
    """A worker's decoded pieces into ``results``, with the map of its string codes into ``pool``'s."""
    if got["failed"]:
        raise NotStreamable
    remap = np.array([pool.code(v) for v in got["strings"]] + [-1], dtype=np.int32)
    for index, result in got["pieces"].items():
        results[index] = result
        remaps[index] = remap


def _merge(pieces: list[dict], remaps: dict[int, np.ndarray], cols: KinetoColumns, base_add: int) -> None:
    """Concatenate the pieces' columns in file order into ``cols``."""
    parts: dict[str, dict[str, list[np.ndarray]]] = {name: {} for name in ACCUMULATED}
    device_rows = 0
    for index, piece in enumerate(pieces):
        remap = remaps.get(index)
        columns = piece["columns"]
        for name, table in columns.items():
            for key, arr in table.items():
                parts[name].setdefault(key, []).append(as_in_trace(name, key, arr, remap, base_add, device_rows))
        device_rows += len(columns.get("device", {}).get("name", ()))
        cols.threads.extend(piece["threads"])
        cols.unknown.update(piece["unknown"])
        piece["columns"] = None  # let each piece go as soon as it is copied
    # Column by column, each piece's arrays freed once copied, and handed
    # back to the system at once: the pieces' arrays are small enough to live
    # in the heap, which keeps freed memory, so without it memory held the
    # pieces twice (at 10M events 1.45 GB, for 0.69 GB of columns).
    for name in ACCUMULATED:
        table = parts.pop(name)
        merged = {}
        for key in list(table):
            merged[key] = np.concatenate(table.pop(key))
            release_freed_memory()
        setattr(cols, name, merged)


def read_stream(path, pool: StringPool, progress: Callable[[int, int], None] | None = None,
                memory_budget_bytes: int | None = None, spill: Spill | None = None) -> KinetoColumns | SpilledTrace:
    """Decode one Kineto trace file block by block (see the module's docstring)."""
    block = block_bytes_for(memory_budget_bytes)
    try:
        fh = open(path, "rb")
    except OSError as exc:
        raise CaptureError(f"{path}: cannot read: {exc.strerror or exc}") from None  # unreadable input: exit 3
    with fh:
        size = os.fstat(fh.fileno()).st_size
        gz = fh.read(2) == b"\x1f\x8b"
        fh.seek(0)
        blocks = gunzip_blocks(path, fh, size, block) if gz else plain_blocks(fh, block)
        events_guess = events_in_file(size, gz)
        return _read_blocks(blocks, size, events_guess, pool, progress, spill)


def _read_blocks(blocks, size: int, events_guess: int, pool: StringPool, progress,
                 spill: Spill | None = None) -> KinetoColumns | SpilledTrace:
    buf, head, done = b"", None, 0
    for data, done in blocks:
        buf = buf + data if buf else data
        head = find_head(buf)
        if head is not None:
            break
        if len(buf) > _HEAD_LIMIT:
            raise NotStreamable
    if head is None:
        raise NotStreamable  # empty, or no traceEvents: the whole-file reader says which
    top = head.top
    base_ns = (top.baseTimeNanoseconds if top is not None else None) or 0
    if not 0 <= base_ns < 2**62:
        raise NotStreamable
    pieces = _Pieces(worker_count(events_guess), base_ns, pool, spill)
    try:
        buf = buf[head.events_at:]
        cut_any = False
        for data, at in _chain_first(blocks):
            done = at or done
            if data:
                buf = buf + data if buf else data
            worker = pieces.idle_worker()
            # Decoded here, the block goes in pieces of a few MiB (memory holds
            # one piece's events, not a block's), each decoded once, that
            # decode the proof of its cut. What no such piece takes (the
            # rest, once a worker is idle, or a cut that does not prove) goes
            # the way every piece went before: proven by its raw text.
            pos = 0
            while worker is None:
                decoded = decoded_cut(buf, pos, pos + _LOCAL_PIECE_BYTES)
                if decoded is None:
                    break
                rest_at, events = decoded
                # The text is only read again for counters and exact times: a view, no copy.
                pieces.here(memoryview(buf)[pos:rest_at - 1], events=events)
                del events
                cut_any = True
                pos = rest_at
                worker = pieces.idle_worker()
            if pos:
                buf = buf[pos:]
            gap = _last_trusted_cut(buf) if worker is not None else None
            if gap is not None:
                # The worker's decode proves it (a failed one sends the file to the whole-file reader).
                pieces.send(worker, buf[:gap[0]])
                cut_any = True
                buf = buf[gap[1]:]
                if progress is not None:
                    progress(done, size)
                continue
            cut = proven_cut(buf)
            if cut is None:
                pieces.spare = worker
                if len(buf) > _REST_LIMIT:
                    raise NotStreamable
                if pos and progress is not None:
                    progress(done, size)
                continue
            rest_at, raws = cut
            if worker is not None:
                pieces.send(worker, buf[:rest_at - 1])
            else:
                pieces.here(buf[:rest_at - 1], raws)
            del raws
            cut_any = True
            buf = buf[rest_at:]
            if progress is not None:
                progress(done, size)
        tail, last = decode_tail(buf, head.bare, cut_any)
        if last:
            pieces.add(b",".join(last), last)
        results = pieces.finish()
    finally:
        pieces.close()
    cols = columns_of(results, pieces.remaps, base_ns, top, tail, spill)
    if progress is not None:
        progress(size, size)
    return cols


def columns_of(results: list[dict], remaps: dict[int, np.ndarray], base_ns: int, top: TopLevel | None,
               tail: TopLevel | None, spill: Spill | None = None) -> KinetoColumns | SpilledTrace:
    """The trace's columns from its decoded pieces (in file order) and the top-level keys around the events.

    With ``spill`` (the pieces' columns are on disk) the columns stay there: a :class:`SpilledTrace`.
    """
    cols = KinetoColumns(base_time_ns=base_ns)
    _set_metadata(cols, top, tail)
    tail_base = tail.baseTimeNanoseconds if tail is not None else None
    if tail_base and not base_ns:
        if not 0 <= tail_base < 2**62:
            raise NotStreamable
        # Kineto writes baseTimeNanoseconds after the events: times were read
        # relative to 0, the base is added to every time column now.
        cols.base_time_ns = tail_base
    cols.event_count = sum(r["events"] for r in results)
    if spill is not None:
        for piece in results:
            cols.threads.extend(piece["threads"])
            cols.unknown.update(piece["unknown"])
        return SpilledTrace(spill, results, remaps, cols.base_time_ns - base_ns, cols)
    _merge(results, remaps, cols, cols.base_time_ns - base_ns)
    return cols


def load_spilled(trace: SpilledTrace) -> KinetoColumns:
    """Every spilled piece back in memory: the columns :func:`columns_of` makes without a spill."""
    cols = trace.cols
    cols.threads, cols.unknown = [], type(cols.unknown)()
    results = [{**piece, "columns": {kind: trace.spill.load(i, kind, names)
                                     for kind, (_, _, _, names) in piece["spilled"].items()}}
               for i, piece in enumerate(trace.pieces)]
    _merge(results, trace.remaps, cols, trace.base_add)
    return cols


def _last_trusted_cut(buf: bytes) -> tuple[int, int] | None:
    """The last trusted gap in the last 64 KiB of buf (None: none there): a cut for a worker's piece
    that this process need not decode to prove."""
    lo = max(0, len(buf) - 2**16)
    found = None
    for found in trusted_cuts(memoryview(buf)[lo:], lo):
        pass
    return found


def _chain_first(blocks) -> Iterator[tuple[bytes, int]]:
    """The blocks left, after one empty one (the text already read is cut first)."""
    yield b"", 0
    yield from blocks


def decode_tail(buf: bytes, bare: bool, cut_any: bool) -> tuple[TopLevel | None, list]:
    """The last events and the top-level keys after the array, from the text left at the end."""
    if cut_any and _CLOSE.match(buf):
        raise NotStreamable  # a comma before "]": not JSON; the whole-file reader says so
    try:
        if bare:
            return None, LIST_DECODER.decode(b"[" + buf)
        tail = TOP_DECODER.decode(b'{"traceEvents": [' + buf)
    except BAD_INPUT:
        raise NotStreamable from None
    return tail, tail.traceEvents or []


def _set_metadata(cols: KinetoColumns, head: TopLevel | None, tail: TopLevel | None) -> None:
    for key in TopLevel.__struct_fields__[2:]:
        for top in (head, tail):
            raw = getattr(top, key) if top is not None else None
            if raw:
                cols.metadata[key] = bytes(raw)
    base = next((t.baseTimeNanoseconds for t in (head, tail) if t is not None and t.baseTimeNanoseconds is not None),
                None)
    if base is not None:
        cols.metadata["baseTimeNanoseconds"] = str(base).encode()
