"""Give freed heap memory back to the system between the stages of a parse.

A parse frees hundreds of MB of short-lived numpy arrays (per-piece columns,
sort keys) between stages. glibc keeps much of that in its heap (its mmap
threshold grows after large frees), so the resident set stays at the high
mark of the previous stage and adds up to the next one's: measured on a
4.5M-event trace, 660 MB resident with 290 MB of live columns, 360 MB after
``malloc_trim``. Elsewhere than glibc this does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys

__all__ = ["release_freed_memory"]

_TRIM = None
if sys.platform.startswith("linux"):
    try:
        _TRIM = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
        _TRIM.argtypes, _TRIM.restype = [ctypes.c_size_t], ctypes.c_int
    except (OSError, AttributeError):  # musl and others: no malloc_trim
        _TRIM = None


def release_freed_memory() -> None:
    """Return the heap's free pages to the system (glibc ``malloc_trim``)."""
    if _TRIM is not None:
        _TRIM(0)
