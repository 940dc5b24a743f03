"""Reader of a plain (uncompressed) Kineto trace in pieces that every process reads itself.

The block reader (:mod:`mlprof.parse.kineto_stream`) passes the whole text
through one process, which proves each cut by decoding it and pipes the
pieces to its workers: on 2 cores the parent was the bottleneck. For a plain
file that is not needed. The parent finds cuts between events by reading a
few KiB at evenly spaced offsets; then the parent and its forked workers each
take the next piece, read it from the file (``pread``) and decode it.

Cuts are the trusted gaps of :mod:`mlprof.parse.kineto_cuts`, and decoding
each piece as a JSON list is their proof. Whatever this reader cannot decide
(a compressed file, one without trusted gaps, a piece that does not decode)
raises :class:`NotStreamable`, and the block reader reads the file again:
it decides every layout it can, and leaves malformed text to the whole-file
reader, which names the problem.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from functools import partial

from mlprof.parse.kineto_events import KinetoColumns, StringPool
from mlprof.parse.spill import Spill, SpilledTrace, kept
from mlprof.parse.kineto_cuts import BAD_INPUT, trusted_cuts
from mlprof.parse.kineto_stream import (
    NotStreamable, decode_piece, decode_tail, find_head, columns_of, take_worker_pieces)
from mlprof.parse.trace_blocks import events_in_file
from mlprof.parse.workers import abandon_part, finish_part, start_part, worker_count

__all__ = ["read_ranges"]

# Text of one piece: about 10,000 Kineto events, decoded in one go.
_PIECE_BYTES = 4 * 2**20
# Piece numbers are handed out through a pipe filled before the workers start:
# at most 1,024 of them (4 KiB, the least a Linux pipe holds), so the pieces
# of a larger file are larger.
_MAX_PIECES = 1024
_PROBE_BYTES = 64 * 2**10
# How far a cut is looked for before the file is left to the block reader:
# one event (or the text after the event array) longer than this.
_SEARCH_LIMIT = 64 * 2**20
_HEAD_LIMIT = 64 * 2**20


def read_ranges(path, pool: StringPool, progress: Callable[[int, int], None] | None = None,
                spill: Spill | None = None) -> KinetoColumns | SpilledTrace:
    """Decode a plain Kineto trace in pieces, in this process and its workers (module docstring)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        raise NotStreamable from None  # the block reader names the error
    try:
        return _read(fd, os.fstat(fd).st_size, pool, progress, spill)
    finally:
        os.close(fd)


def _read(fd: int, size: int, pool: StringPool, progress, spill: Spill | None) -> KinetoColumns | SpilledTrace:
    if os.pread(fd, 2, 0) == b"\x1f\x8b":
        raise NotStreamable
    head, text = None, b""
    while head is None:
        more = os.pread(fd, 2**20, len(text))
        if not more or len(text) > _HEAD_LIMIT:
            raise NotStreamable
        text += more
        head = find_head(text)
    base_ns = (head.top.baseTimeNanoseconds if head.top is not None else None) or 0
    if not 0 <= base_ns < 2**62:
        raise NotStreamable
    last = _last_cut(fd, size, head.events_at)
    pieces = _pieces(fd, head.events_at, last[0], max(_PIECE_BYTES, -(-size // _MAX_PIECES)))
    results, remaps = _decode_all(fd, pieces, base_ns, pool, progress, size, spill)
    tail, last_events = decode_tail(os.pread(fd, size - last[1], last[1]), head.bare, True)
    if last_events:
        results[len(pieces)] = kept(spill, len(pieces), decode_piece(b",".join(last_events), base_ns,
                                                                     pool, last_events))
    cols = columns_of([results[i] for i in range(len(results))], remaps, base_ns, head.top, tail, spill)
    if progress is not None:
        progress(size, size)
    return cols


def _cuts_in(fd: int, start: int, stop: int) -> Iterator[tuple[int, int]]:
    """(end of the ``}``, start of the ``{``) of each cut in the file's bytes [start, stop), in order."""
    return trusted_cuts(os.pread(fd, stop - start, start), start)


def _last_cut(fd: int, size: int, events_at: int) -> tuple[int, int]:
    """The file's last cut, looked for backwards from its end; the text after it is the last event and the
    keys after the array."""
    span = _PROBE_BYTES
    while True:
        start = max(events_at, size - span)
        found = None
        for found in _cuts_in(fd, start, size):
            pass
        if found is not None:
            return found
        if start == events_at or span >= _SEARCH_LIMIT:
            raise NotStreamable
        span *= 4


def _first_cut(fd: int, at: int, stop: int) -> tuple[int, int] | None:
    """The first cut from ``at`` on, before ``stop`` (None: none before it)."""
    start = at
    while start < stop:
        end = min(stop, start + _PROBE_BYTES)
        # The windows overlap by a few bytes, so a cut on a window's edge is still seen.
        for cut in _cuts_in(fd, max(at, start - 64), end):
            return cut
        if end - at > _SEARCH_LIMIT:
            raise NotStreamable
        start = end
    return None


def _pieces(fd: int, events_at: int, events_end: int, piece_bytes: int) -> list[tuple[int, int]]:
    """[start, end) of each piece of the event array's text before its last event."""
    pieces, pos = [], events_at
    while pos + piece_bytes < events_end:
        cut = _first_cut(fd, pos + piece_bytes, events_end)
        if cut is None:
            break
        pieces.append((pos, cut[0]))
        pos = cut[1]
    pieces.append((pos, events_end))
    return pieces


def _decode_range(fd: int, piece: tuple[int, int], base_ns: int, pool: StringPool) -> dict:
    start, end = piece
    text = os.pread(fd, end - start, start)
    if len(text) != end - start:  # the file shrank under us
        raise NotStreamable
    try:
        return decode_piece(text, base_ns, pool)
    except BAD_INPUT:
        raise NotStreamable from None


def _taken(token_r: int) -> Iterator[int]:
    """Piece numbers taken from the shared pipe until it is empty (each read takes one, whole)."""
    while len(data := os.read(token_r, 4)) == 4:
        yield int.from_bytes(data, "little")


def _worker(fd: int, pieces: list[tuple[int, int]], token_r: int, base_ns: int, spill: Spill | None) -> dict:
    pool = StringPool()
    done = {}
    try:
        for index in _taken(token_r):
            done[index] = kept(spill, index, _decode_range(fd, pieces[index], base_ns, pool))
    except NotStreamable:
        return {"failed": True}
    return {"failed": False, "strings": pool.keys(), "pieces": done}


def _decode_all(fd: int, pieces: list[tuple[int, int]], base_ns: int, pool: StringPool, progress,
                size: int, spill: Spill | None) -> tuple[dict[int, dict], dict]:
    """Every piece decoded, by whichever process takes it first; results by piece number."""
    token_r, token_w = os.pipe()
    try:
        os.write(token_w, b"".join(i.to_bytes(4, "little") for i in range(len(pieces))))
    finally:
        os.close(token_w)  # before the workers start: an empty pipe then reads as its end
    workers = []
    results: dict[int, dict] = {}
    remaps: dict = {}
    try:
        workers = [start_part(partial(_worker, fd, pieces, token_r, base_ns, spill))
                   for _ in range(min(worker_count(events_in_file(size, False)), len(pieces)) - 1)]
        for index in _taken(token_r):
            results[index] = kept(spill, index, _decode_range(fd, pieces[index], base_ns, pool))
            if progress is not None:
                progress(pieces[index][1], size)
        for k, part in enumerate(workers):
            got = finish_part(part)
            workers[k] = None
            take_worker_pieces(got, pool, results, remaps)
    finally:
        for part in workers:
            if part is not None:
                abandon_part(part)
        os.close(token_r)
    return results, remaps
