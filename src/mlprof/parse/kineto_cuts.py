"""Where the text of a Kineto event array may be cut between two events, and the proof of a cut.

A ``}`` and a ``,`` may also lie inside a string (an op name holding
``}, {``) or inside a nested array, so a cut is only taken once the text
before it decodes as a JSON list: one inside a string leaves the piece's
last string open, one in a nested array leaves the piece unbalanced, and the
decode fails. The block reader proves its cuts that way (:func:`proven_cut`,
:func:`decoded_cut`); the reader by offsets looks only at gaps that nearly
never lie anywhere else (:func:`trusted_cuts`) and lets the decode of each
piece prove them.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import msgspec

from mlprof.parse.kineto_events import (EVENTS_DECODER, LIST_DECODER, MalformedEventError, StringTooLongError,
                                        TimeRangeError)

__all__ = ["BAD_INPUT", "as_array", "proven_cut", "decoded_cut", "trusted_cuts"]

# Errors of hostile or corrupt input that msgspec and numpy raise as such.
BAD_INPUT = (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError, RecursionError,
             OverflowError, TimeRangeError, StringTooLongError, MalformedEventError)
_COMMA = re.compile(rb"\s*,")
# A "}", a comma, and the "{" of the next element, with a line break in the
# gap (Kineto writes "},\n{") or an event's usual first key after the "{"
# (json.dumps writes '}, {"ph"'). JSON allows no raw line break inside a
# string, and inside an object a comma is followed by a key, so the first
# kind lies between two elements of an array, and the second nearly always does.
_TRUSTED = re.compile(rb'\}(\s*,\s*)\{(\s*"(?:ph|name|cat|pid)")?')


def trusted_cuts(text, offset: int = 0) -> Iterator[tuple[int, int]]:
    """(end of the ``}``, start of the next ``{``) of each trusted gap in ``text``, plus ``offset``, in order."""
    for m in _TRUSTED.finditer(text):
        if b"\n" in m.group(1) or m.group(2):
            yield offset + m.start() + 1, offset + m.start(1) + len(m.group(1))


_CANDIDATE = re.compile(rb"\}\s*,")


def _last_comma(buf: bytes, lo: int = 0, hi: int | None = None) -> int | None:
    """Where the rest starts after the last ``}`` + ``,`` of buf[lo:hi] (None: there is none)."""
    hi = len(buf) if hi is None else hi
    while (i := buf.rfind(b"}", lo, hi)) >= 0:
        m = _COMMA.match(buf, i + 1)
        if m is not None:
            return m.end()
        hi = i
    return None


def as_array(text, lo: int = 0, hi: int | None = None) -> bytes:
    """``[`` + text[lo:hi] + ``]``, with one copy of the text (a block is megabytes)."""
    return b"".join((b"[", memoryview(text)[lo:hi], b"]"))


def proven_cut(buf: bytes) -> tuple[int, list] | None:
    """(start of the rest, decoded events) of the longest provable piece of buf; None: read more.

    Candidates are the ``}`` + ``,`` of buf. The last one nearly always
    proves; when it lies inside a string (an op name holding ``}, {``) the
    decode fails and a bisection over the candidates finds a later one that
    proves. None of them proving means malformed text or one event longer
    than buf.
    """
    last = _last_comma(buf)
    if last is None:
        return None
    try:  # the common case: one decode, no scan of the whole block for candidates
        return last, LIST_DECODER.decode(as_array(buf, 0, buf.rindex(b"}", 0, last) + 1))
    except BAD_INPUT:
        pass
    ends = [m.end() for m in _CANDIDATE.finditer(buf)][:-1]
    lo, hi, best = 0, len(ends) - 1, None
    while lo <= hi:
        k = (lo + hi + 1) // 2
        at = ends[k]
        close = buf.rindex(b"}", 0, at) + 1
        try:
            raws = LIST_DECODER.decode(b"[" + buf[:close] + b"]")
        except BAD_INPUT:
            hi = k - 1
            continue
        best = (at, raws)
        lo = k + 1
    return best


def decoded_cut(buf: bytes, lo: int, hi: int, decoder=EVENTS_DECODER) -> tuple[int, list] | None:
    """(start of the rest, decoded events) when the events of buf[lo:] up to the last cut before
    ``hi`` decode; None: there is no such cut, or they do not decode.

    For a piece decoded in this process: decoding its events proves the cut
    as the decode of their raw text would (the same text, the same JSON), so
    that text is not decoded twice. None sends the caller to
    :func:`proven_cut`, which finds the cut (or the bad event) as always.
    """
    last = _last_comma(buf, lo, min(hi, len(buf)))
    if last is None:
        return None
    try:
        return last, decoder.decode(as_array(buf, lo, buf.rindex(b"}", lo, last) + 1))
    except BAD_INPUT:
        return None
