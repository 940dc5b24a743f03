"""A POSIX timer that signals one thread of this process at a fixed period (Linux, through ctypes).

The stack sampler uses it to make the training thread read its own stack
(``stack_sampler``): a thread reading its own frames is safe where reading
another thread's is not. Not ``signal.setitimer``: its signal (SIGALRM) goes
to the whole process, so any thread blocked in a system call could see EINTR,
and SIGALRM is taken by ``signal.alarm`` and by pytest-timeout. A
``timer_create`` timer with ``SIGEV_THREAD_ID`` sends a real-time signal that
nobody else in the process handles to the one thread.

Linux on 64-bit hosts only (the ``sigevent`` and ``sigaction`` layouts below
are those of glibc and musl there); ``usable_signal()`` says None anywhere
else, and the sampler then reads the stack from a thread of its own.
Nothing here imports torch.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import sys
import threading
from typing import Any, Callable

__all__ = ["SignalTimer", "usable_signal", "install_handler"]

_CLOCK_MONOTONIC = 1
_SIGEV_THREAD_ID = 4
# The signal's disposition may only be ours or the default: a handler set from C (not visible to
# signal.getsignal) would be replaced without its owner knowing.
_SIG_DFL = 0


class _Sigevent(ctypes.Structure):
    # struct sigevent: sigval (8), signo, notify, then a 48-byte union whose first int is the thread id.
    _fields_ = [("sigev_value", ctypes.c_void_p), ("sigev_signo", ctypes.c_int), ("sigev_notify", ctypes.c_int),
                ("sigev_notify_thread_id", ctypes.c_int), ("_pad", ctypes.c_int * 11)]


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


class _Itimerspec(ctypes.Structure):
    _fields_ = [("it_interval", _Timespec), ("it_value", _Timespec)]


_libc_functions: tuple[Any, Any, Any, Any] | None | bool = False  # False: not looked up yet


def _functions() -> tuple[Any, Any, Any, Any] | None:
    """(timer_create, timer_settime, timer_delete, sigaction), or None where they cannot be used."""
    global _libc_functions
    if _libc_functions is False:
        _libc_functions = None
        if sys.platform.startswith("linux") and ctypes.sizeof(ctypes.c_void_p) == 8 \
                and ctypes.sizeof(_Sigevent) == 64:
            for name in (None, ctypes.util.find_library("rt")):  # glibc >= 2.34 has them in libc itself
                try:
                    lib = ctypes.CDLL(name, use_errno=True)
                    _libc_functions = (lib.timer_create, lib.timer_settime, lib.timer_delete, lib.sigaction)
                    break
                except (OSError, AttributeError):
                    continue
    return _libc_functions or None


def _c_disposition(signum: int) -> int | None:
    """The signal's handler address as the kernel has it (0: default), None where it cannot be read."""
    functions = _functions()
    if functions is None:
        return None
    buffer = ctypes.create_string_buffer(256)  # struct sigaction is 152 bytes on 64-bit Linux; sa_handler first
    if functions[3](signum, None, buffer) != 0:
        return None
    return ctypes.c_void_p.from_buffer(buffer).value or 0


def usable_signal(handler: Callable) -> int | None:
    """A real-time signal that is free in this process (or already ``handler``'s), or None: no timers here,
    or not on the main thread (only it may set handlers, and only it runs them)."""
    if threading.current_thread() is not threading.main_thread() or _functions() is None:
        return None
    low, high = getattr(signal, "SIGRTMIN", 0), getattr(signal, "SIGRTMAX", 0)
    if not low or high - low < 8:
        return None
    # From the top: libraries that take real-time signals count up from SIGRTMIN.
    for signum in range(high - 1, low + 3, -1):
        python_handler = signal.getsignal(signum)
        if python_handler is handler:
            return signum
        if python_handler is signal.SIG_DFL and _c_disposition(signum) == _SIG_DFL:
            return signum
    return None


def install_handler(signum: int, handler: Callable) -> None:
    """``handler`` for ``signum``, with system calls interrupted by it restarted (SA_RESTART). It stays
    installed: a tick still on its way when a timer is deleted must not meet the default action, which
    for a real-time signal ends the process."""
    if signal.getsignal(signum) is not handler:
        signal.signal(signum, handler)
    signal.siginterrupt(signum, False)


class SignalTimer:
    """Sends ``signum`` to thread ``tid`` (its native id) every ``interval_ns`` of CLOCK_MONOTONIC."""

    def __init__(self, signum: int, tid: int, interval_ns: int) -> None:
        functions = _functions()
        if functions is None:
            raise OSError("POSIX timers are not available here")
        self._create, self._settime, self._delete = functions[:3]
        event = _Sigevent(sigev_signo=signum, sigev_notify=_SIGEV_THREAD_ID, sigev_notify_thread_id=tid)
        self._timer = ctypes.c_void_p()
        if self._create(_CLOCK_MONOTONIC, ctypes.byref(event), ctypes.byref(self._timer)) != 0:
            raise OSError(ctypes.get_errno(), "timer_create failed")
        self._live = True
        # Timers are not inherited by fork(); in a child the id may name a timer of the child's own.
        self._pid = os.getpid()
        seconds, nanoseconds = divmod(interval_ns, 1_000_000_000)
        self._period = _Timespec(seconds, nanoseconds)

    def start(self) -> None:
        """First tick one period from now, then one every period (overruns are dropped, not queued)."""
        spec = _Itimerspec(self._period, self._period)
        if self._settime(self._timer, 0, ctypes.byref(spec), None) != 0:
            error = ctypes.get_errno()
            self.delete()
            raise OSError(error, "timer_settime failed")

    def delete(self) -> None:
        """Stop the timer for good (safe to call twice, from any thread; a no-op in a forked child)."""
        if self._live and os.getpid() == self._pid:
            self._live = False
            self._delete(self._timer)
