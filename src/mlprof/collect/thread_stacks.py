"""Another thread's Python stack, read in one C call that holds the GIL throughout.

The obvious way, ``sys._current_frames()[ident]`` and then ``f_back`` frame by
frame, crashes CPython 3.11 (and is not known safe after it): the GIL can pass
to the sampled thread between two ``f_back`` reads, the thread moves on, and
the next read follows a dangling pointer (python/cpython#111363; Sentry's and
Datadog's samplers crashed their hosts the same way). mlprof's sampler did it
in 1 run of 14 of a small training loop (exit 139 in the sampler thread).

``faulthandler.dump_traceback(fd, all_threads=True)`` walks every thread's
frames in C without letting the GIL go, so no frame changes under it; it writes
``  File "path", line N in function`` lines, innermost first, under a header
naming each thread's ident. It writes each piece with its own system call, so
a 60-frame stack costs about 0.35 ms on a 2-vCPU VM (a frame walk in Python:
a few us): safety first, and the sampler runs every 10 ms by default.
The text goes to an in-memory file (``memfd``; a temporary file elsewhere),
and a block seen before is not parsed again.
"""

from __future__ import annotations

import faulthandler
import os
import re
import tempfile
import time

__all__ = ["ThreadStacks", "Frame"]

Frame = tuple[str, int, str]  # (file, line, function); line 0 where faulthandler printed "???"

_FRAME_LINE = re.compile(r'^  File "(.*)", line (\d+|\?\?\?) in (.*)$')
# Distinct stack texts kept parsed; past it each new text is parsed again (runaway recursion, generated code).
_MAX_CACHED = 20_000
# The scratch file is written from its start again past this size.
_REWIND_BYTES = 1 << 20


class ThreadStacks:
    """Reads the Python stack of the thread whose ``threading.get_ident()`` is ``ident``."""

    def __init__(self, ident: int) -> None:
        # faulthandler prints an ident as "0x" and 16 hex digits on 64-bit hosts (8 on 32-bit).
        self._marks = tuple(f"0x{ident:0{width}x}".encode() for width in (16, 8))
        self._file = _scratch_file()
        self._parsed: dict[bytes, tuple[Frame, ...]] = {}
        self.read_ns = 0
        self._end = 0  # where the next dump starts in the file

    def read(self) -> tuple[Frame, ...] | None:
        """The thread's frames, innermost first; None when it is gone; () when it runs no Python.
        ``read_ns`` is then the wall-clock time of the dump."""
        fd = self._file.fileno()
        # Each dump goes after the one before: a seek back first would let the GIL go, and the job's thread run,
        # between the caller's decision to sample and the dump. Back to the start only now and then.
        if self._end > _REWIND_BYTES:
            self._end = os.lseek(fd, 0, os.SEEK_SET)
        faulthandler.dump_traceback(fd, all_threads=True)
        self.read_ns = time.time_ns()
        start, self._end = self._end, os.lseek(fd, 0, os.SEEK_CUR)
        text = os.pread(fd, self._end - start, start)
        block = self._block(text)
        if block is None:
            return None
        frames = self._parsed.get(block)
        if frames is None:
            frames = parse_block(block)
            if len(self._parsed) < _MAX_CACHED:
                self._parsed[block] = frames
        return frames

    def close(self) -> None:
        self._file.close()

    def _block(self, text: bytes) -> bytes | None:
        for mark in self._marks:
            at = text.find(mark)
            if at >= 0:
                start = text.find(b"\n", at)
                if start < 0:
                    return b""
                end = text.find(b"\n\n", start)
                return text[start + 1:] if end < 0 else text[start + 1:end + 1]
        return None


def parse_block(block: bytes) -> tuple[Frame, ...]:
    """One thread's lines of a faulthandler dump as frames, innermost first (other lines skipped:
    "<no Python frame>", "..." past its depth limit, "Garbage-collecting")."""
    frames = []
    for line in block.decode("utf-8", "replace").splitlines():
        m = _FRAME_LINE.match(line)
        if m:
            lineno = m.group(2)
            frames.append((m.group(1), int(lineno) if lineno.isdigit() else 0, m.group(3)))
    return tuple(frames)


def _scratch_file():
    """An unbuffered read-write file that lives in memory where Linux allows (closed when collected)."""
    if hasattr(os, "memfd_create"):
        try:
            return open(os.memfd_create("mlprof-stacks", os.MFD_CLOEXEC), "r+b", buffering=0)
        except OSError:
            pass
    return tempfile.TemporaryFile(buffering=0)
