"""Kineto times to int ns: float µs after a base, or exact decimal text when a double cannot hold them.

Kineto writes ``ts``/``dur`` as float microseconds. Up to 2**43 µs (101.8
days, after ``baseTimeNanoseconds`` or not) a double holds them to the ns;
larger ones (epoch µs, or months after a base) are not, so those chunks are
read again from the JSON text (:func:`decimal_us_to_ns`). Every value is
range-checked: a time must fit int64 ns after the base is added.
"""

from __future__ import annotations

import msgspec
import numpy as np

__all__ = ["MAX_US", "TimeRangeError", "decimal_us_to_ns", "needs_exact_times", "exact_times", "exact_ts_ns",
           "ts_texts_to_ns", "ts_ns_need_text", "exact_ts_of_raws",
           "ns_column",
           "dur_column", "EMPTY_RAW"]

# An absent Raw field: msgspec cannot put Raw in a union with None.
EMPTY_RAW = msgspec.Raw()


# Largest |µs| a time or duration may have: 2**62 ns, about 146 years, so
# that base + ts stays inside int64 (more is a corrupt or hostile trace).
MAX_US = float(2**62 // 1000)


class TimeRangeError(ValueError):
    """A ts/dur too large (or not finite) to be a time in ns as int64."""


# From this |µs| on, a double no longer gives a time to the ns; such chunks are read again with
# ts as its exact decimal text. Below 2**43 µs (101.8 days) a double is within 0.49 ns of the
# µs text Kineto writes (three decimals), so rounding gives its ns exactly. Kineto's ts after
# baseTimeNanoseconds are not small: 14 to 55 days on the real traces at hand, so a base does not
# make a chunk safe; epoch µs without a base are always read again.
_EXACT_FROM_US = float(2**43)


class _Times(msgspec.Struct, gc=False):
    ts: msgspec.Raw = EMPTY_RAW


_TIMES_DECODER = msgspec.json.Decoder(list[_Times])


def needs_exact_times(events: list) -> bool:
    ts = np.fromiter([e.ts for e in events], dtype=np.float64, count=len(events))
    return bool(len(ts)) and float(np.abs(ts).max()) >= _EXACT_FROM_US


def ts_ns_need_text(ts_ns: list[int]) -> bool:
    """Whether exact ns (read from the text) are times a double would not have held: the rule of
    :func:`needs_exact_times`, for times already read."""
    return max(map(abs, ts_ns), default=0) >= int(_EXACT_FROM_US) * 1000


def exact_ts_of_raws(raws: list) -> list[int]:
    """Each event's exact ts in ns, from the events' raw JSON text."""
    return exact_ts_ns(b"[" + b",".join(raws) + b"]")


def exact_ts_ns(array_text) -> list[int]:
    """Each event's ts, in exact ns from its decimal µs text, of a JSON array of events (0: none)."""
    return ts_texts_to_ns([t.ts for t in _TIMES_DECODER.decode(array_text)])


def ts_texts_to_ns(raws: list) -> list[int]:
    """Raw JSON ts texts (µs) to exact int ns (an absent one, empty: NaN, as the float decode
    gives it); a text that is no number raises :class:`TimeRangeError`."""
    # One join and one split copy the texts at C speed (bytes() of each costs 0.2 µs); a number holds no NUL.
    texts = b"\0".join(raws).split(b"\0")
    if len(texts) != len(raws):
        texts = [bytes(t) for t in raws]
    ns = decimal_us_to_ns([t or b"0" for t in texts]).tolist()
    if not all(texts):  # absent times stay absent: the columns refuse them where an event needs one
        ns = [t if text else float("nan") for t, text in zip(ns, texts)]
    return ns


def exact_times(events: list, ts_ns: list[int]) -> None:
    """Replace each event's float ts by its exact int ns (:func:`exact_ts_ns`).

    Durations stay floats: they are small, so a double holds them to the ns.
    """
    for e, t in zip(events, ts_ns):
        e.ts = t


def _slow_decimal_ns(text: bytes) -> int:
    from decimal import ROUND_HALF_UP, Decimal, InvalidOperation

    try:
        value = Decimal(text.decode("ascii"))
        ns = int((value * 1000).to_integral_value(ROUND_HALF_UP))
    except (InvalidOperation, ValueError, UnicodeDecodeError, OverflowError):
        raise TimeRangeError(f"time {text[:40]!r} is not a number") from None
    if not abs(ns) < 2**62:
        raise TimeRangeError(f"time {text[:40].decode('ascii', 'replace')} µs is out of range")
    return ns


_POW10 = 10 ** np.arange(19, dtype=np.int64)


def _uniform_ns(m: np.ndarray) -> np.ndarray | None:
    """The ns of a batch of texts (rows of ``m``, zero-padded bytes) that are all ``digits[.d[d[d]]]``
    of one length with the dot in one place, as Kineto writes them, a digit column at a time;
    None for any other batch (the general path then decides, and names a bad value)."""
    n, width = m.shape
    if not (m[:, -1] != 0).all():  # a shorter text among them
        return None
    dots = np.flatnonzero((m == ord(".")).any(0))
    if len(dots) == 0:
        decimals, digits = 0, m
    elif len(dots) == 1 and 1 <= width - 1 - dots[0] <= 3 and dots[0] >= 1 and (m[:, dots[0]] == ord(".")).all():
        decimals, digits = width - 1 - int(dots[0]), np.delete(m, dots[0], axis=1)
    else:
        return None
    if digits.shape[1] - decimals > 16 or ((digits - ord("0")) > 9).any():  # uint8: below "0" wraps high
        return None
    # At most 19 digits: exact in uint64; times 1000 past the decimals stays below 2**64.
    ns = np.zeros(n, dtype=np.uint64)
    for j in range(digits.shape[1]):
        ns = ns * np.uint64(10) + (digits[:, j] - ord("0"))
    ns *= np.uint64(10 ** (3 - decimals))
    if (ns >= np.uint64(MAX_US * 1000)).any():
        return None
    return ns.astype(np.int64)


def decimal_us_to_ns(texts: list[bytes]) -> np.ndarray:
    """JSON decimal µs texts to int ns, exactly (half-up below the ns), vectorised.

    Plain ``[-]digits[.digits]`` texts are done column by column in numpy;
    exponents and anything odd go through :mod:`decimal`.
    """
    n = len(texts)
    width = max(map(len, texts), default=0)
    if n == 0 or width > 48:
        return np.array([_slow_decimal_ns(t) for t in texts], dtype=np.int64)
    m = np.array(texts, dtype=f"S{width}").view(np.uint8).reshape(n, width)
    uniform = _uniform_ns(m)
    if uniform is not None:
        return uniform
    neg = m[:, 0] == ord("-")
    digit = (m >= 48) & (m <= 57)
    dots = m == ord(".")
    plain = digit | dots | (m == 0)
    plain[:, 0] |= neg
    length = (m != 0).sum(1)
    dot = np.where(dots.any(1), dots.argmax(1), length)
    ok = plain.all(1) & (dots.sum(1) <= 1) & (dot > neg) & (dot - neg <= 16)
    value = m.astype(np.int64) - 48
    rows = np.arange(n)
    exponent = dot[:, None] - 1 - np.arange(width)  # of each digit left of the dot
    weight = _POW10[np.clip(exponent, 0, 18)] * (digit & (exponent >= 0))
    whole = (value * weight).sum(1)
    ns = np.zeros(n, dtype=np.int64)
    for k in range(1, 5):  # three digits to the ns, the fourth to round
        at = np.minimum(dot + k, width - 1)
        d = np.where((dot + k < width) & digit[rows, at], value[rows, at], 0)
        ns = ns * 10 + d if k < 4 else ns + (d >= 5)
    ok &= whole < MAX_US
    ns = np.where(neg, -1, 1) * (np.where(ok, whole, 0) * 1000 + ns)
    for i in np.flatnonzero(~ok).tolist():
        ns[i] = _slow_decimal_ns(texts[i])
    return ns


def _checked_us(values: list) -> np.ndarray:
    us = np.asarray(values, dtype=np.float64)
    bad = ~(np.abs(us) < MAX_US)  # also catches NaN and infinities
    if bad.any():
        raise TimeRangeError(f"time {us[np.argmax(bad)]!r} µs is out of range")
    return us


def _exact_ns(values: list) -> np.ndarray:
    # Ints: already exact ns (see exact_times); NaN = an absent dur.
    try:
        return np.array(values, dtype=np.int64)
    except (TypeError, ValueError, OverflowError):
        raise TimeRangeError("a time is out of range") from None


def ns_column(values: list, base_ns: int) -> np.ndarray:
    if values and type(values[0]) is int:
        return _exact_ns(values) + base_ns
    # Kineto times are float microseconds; round(x * 1000) keeps ns resolution.
    # Whole and fractional µs are scaled apart: absolute µs (no
    # baseTimeNanoseconds) times 1000 would not fit a double's 53 bits.
    us = _checked_us(values)
    whole = np.floor(us)
    return whole.astype(np.int64) * 1000 + np.rint((us - whole) * 1000.0).astype(np.int64) + base_ns


def dur_column(values: list) -> np.ndarray:
    us = _checked_us(values)
    # Kineto guards against negative durations since 2022 (pytorch/kineto#646, an end time of 0):
    # one is a corrupt event, and read as is it makes negative step times.
    if (us < 0).any():
        raise TimeRangeError(f"duration {us[np.argmax(us < 0)]!r} µs is negative")
    return np.rint(us * 1000.0).astype(np.int64)
