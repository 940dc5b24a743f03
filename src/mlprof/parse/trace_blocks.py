"""A trace file's text in blocks, plain or gunzipped, and its size in events before it is read.

Both Kineto readers take their text from here: the streaming one (:mod:`mlprof.parse.kineto_stream`) block
by block, the whole-file one (:mod:`mlprof.parse.kineto`) to gunzip into a mapped temporary file. The gzip
reader holds the caps that keep a decompression bomb from filling memory or disk.
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Iterator

from mlprof.errors import TraceFormatError
from mlprof.tables.budget import memory_budget_bytes

__all__ = ["MAX_EXPANDED_ENV", "block_bytes_for", "events_in_file", "events_in_trace", "gunzip_blocks",
           "plain_blocks"]

# Text held per block: a 64th of the budget (blocks, the piece being cut and
# the workers' copies stay a small part of it), between 1 and 32 MiB.
_BLOCK_SHARE = 64
_MIN_BLOCK, _MAX_BLOCK = 2**20, 32 * 2**20


# Kineto's JSON text per event (348-364 bytes on CPU traces) and gzip's ratio on it (10-17x on the
# shared traces: the highest, so that a gzip trace is not taken for a small one).
_TEXT_BYTES_PER_EVENT = 350
_GZIP_RATIO = 17


def events_in_file(size: int, gz: bool) -> int:
    """About how many events a trace file of ``size`` bytes holds (before it is read)."""
    return size * (_GZIP_RATIO if gz else 1) // _TEXT_BYTES_PER_EVENT


# A plain trace's sample: windows across the file; a gzip trace's: the text its start expands to.
_SAMPLE_WINDOWS, _SAMPLE_WINDOW_BYTES, _GZIP_SAMPLE_BYTES = 16, 64 * 2**10, 4 * 2**20


def _expanded_size(fh, size: int, by_ratio: float) -> float:
    """A gzip file's expanded size: its trailer's (the size modulo 4 GiB), taken with the multiple of
    4 GiB nearest ``by_ratio`` (estimated from the compression of its head, which differs from the
    whole file's by 5-10% on the shared traces); ``by_ratio`` itself when the two disagree by half
    (a file of several gzip members, whose trailer holds the last member's size alone)."""
    if size < 18:
        return by_ratio
    fh.seek(size - 4)
    trailer = int.from_bytes(fh.read(4), "little")
    expanded = trailer + round(max(0.0, by_ratio - trailer) / 2**32) * 2**32
    return expanded if abs(expanded - by_ratio) <= by_ratio / 2 else by_ratio


def events_in_trace(path) -> int:
    """About how many events the trace file ``path`` holds, from a sample of its text: every event
    has one ``"ph"`` key, and events differ in size by kind (a GPU trace's average 220-230 bytes, a
    CPU trace's 350). A gzip file is sampled at its head, and its expanded size read from its
    trailer. Without a usable sample, :func:`events_in_file`."""
    size = os.path.getsize(path)
    with open(path, "rb") as fh:
        gz = fh.read(2) == b"\x1f\x8b"
        fh.seek(0)
        if gz:
            inflate, text, used = zlib.decompressobj(16 + zlib.MAX_WBITS), b"", 0
            while len(text) < _GZIP_SAMPLE_BYTES and not inflate.eof:
                chunk = fh.read(2**16)
                if not chunk:
                    break
                try:
                    text += inflate.decompress(chunk, _GZIP_SAMPLE_BYTES - len(text))
                except zlib.error:
                    break  # the reader names the problem
                used += len(chunk) - len(inflate.unconsumed_tail)
            expanded = _expanded_size(fh, size, size * len(text) / max(1, used))
        else:
            step = max(_SAMPLE_WINDOW_BYTES, size // _SAMPLE_WINDOWS)
            windows = []
            for at in range(0, size, step):
                fh.seek(at)
                windows.append(fh.read(_SAMPLE_WINDOW_BYTES))
            text, expanded = b"".join(windows), size
    count = text.count(b'"ph"')
    if count < 16:
        return events_in_file(size, gz)
    return int(expanded * count / len(text))


def block_bytes_for(budget_bytes: int | None) -> int:
    budget = memory_budget_bytes(budget_bytes)
    return int(min(_MAX_BLOCK, max(_MIN_BLOCK, budget // _BLOCK_SHARE)))


# -- blocks of text --------------------------------------------------------------
# Caps on what a gzip trace may expand to: a decompression bomb (a small file
# of ever-repeating bytes) must not fill memory or disk. Real Kineto traces
# compress about 20:1.
MAX_EXPANDED_ENV = "MLPROF_MAX_TRACE_BYTES"
_DEFAULT_MAX_EXPANDED = 32 * 2**30
# The ratio is that of the text so far to the compressed bytes read so far: a
# bomb is refused after its first 16 MiB of text (a 1 GiB one had been read
# to its end: 11-40 s and 650 MB). Deflate cannot pass about 1032x, and only a
# long run of one repeated pattern comes near it.
_MAX_RATIO = 1000
_RATIO_FROM = 16 * 2**20


def _max_expanded() -> tuple[int, int]:
    """(size cap, ratio cap); an explicit MLPROF_MAX_TRACE_BYTES replaces both."""
    try:
        return max(1, int(os.environ[MAX_EXPANDED_ENV])), 2**62
    except (KeyError, ValueError):
        return _DEFAULT_MAX_EXPANDED, _MAX_RATIO


def gunzip_blocks(path, fh, size: int, block: int) -> Iterator[tuple[bytes, int]]:
    """(expanded text, compressed bytes read so far) of a gzip file, all members.

    Refuses (naming the cap) output beyond the size cap, or, from 16 MiB on,
    beyond 1000x the compressed bytes read so far; a member cut short is a
    truncated file.
    """
    cap, ratio = _max_expanded()
    written = 0
    inflater, fresh, data = zlib.decompressobj(wbits=31), True, b""
    try:
        while True:
            if not data:
                data = fh.read(block)
                if not data:
                    if not fresh:
                        raise TraceFormatError(f"{path}: corrupt or truncated gzip data (ends inside a member)")
                    return
            piece = inflater.decompress(data, block)
            fresh = False
            written += len(piece)
            if inflater.eof:  # another gzip member may follow
                data = inflater.unused_data
                inflater, fresh = zlib.decompressobj(wbits=31), True
            else:
                data = inflater.unconsumed_tail
            read = fh.tell() - len(data)
            if written > cap or (written > _RATIO_FROM and written > ratio * max(read, 1)):
                limit = f"{cap:,} bytes" if written > cap else f"{ratio}x the compressed bytes read"
                raise TraceFormatError(f"{path}: gzip data expands beyond {limit}: a decompression bomb or "
                                       f"not a trace; refused (set {MAX_EXPANDED_ENV} to allow more)")
            if piece:
                yield piece, read
    except (zlib.error, EOFError) as exc:
        raise TraceFormatError(f"{path}: corrupt or truncated gzip data ({exc})") from None


def plain_blocks(fh, block: int) -> Iterator[tuple[bytes, int]]:
    done = 0
    while data := fh.read(block):
        done += len(data)
        yield data, done
