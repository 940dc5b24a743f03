"""The stack sampler's timer signal: the training thread reads its own stack, one sample per tick."""

from __future__ import annotations

import ctypes
import hashlib
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from mlprof.collect import signal_timer, stack_sampler
from mlprof.collect.stack_sampler import StackSampler, _on_tick

MS = 1_000_000
THIS_FILE = __file__

pytestmark = pytest.mark.skipif(signal_timer.usable_signal(_on_tick) is None,
                                reason="no POSIX timer signal here (not Linux, or no free real-time signal)")


def spin(duration_s: float) -> int:
    end = time.perf_counter() + duration_s
    total = 0
    while time.perf_counter() < end:
        total += 1
    return total


def hash_for_a_while(data: bytes) -> bytes:
    # One C call that releases the GIL and never checks for signals: the ticks wait for it to return.
    return hashlib.sha256(data).digest()


def _functions_in_this_file(out: dict, stack: int) -> list[str]:
    return [out["frames"][i][2] for i in out["stacks"][stack] if out["frames"][i][0] == THIS_FILE]


@pytest.fixture
def no_waits(monkeypatch):
    """Every interval judged not spent waiting for a core: what these tests check must not depend on the
    machine's load (test_stack_sampler_wait.py checks the waits)."""
    monkeypatch.setattr(stack_sampler, "mostly_waited", lambda before, after: False)


def test_the_main_thread_samples_itself_by_timer_signal(no_waits):
    sampler = StackSampler.for_current_thread(interval_ns=2 * MS)
    sampler.start()
    try:
        assert sampler.method == "signal" and sampler.running()
        assert not any(t.name == "mlprof-stack-sampler" for t in threading.enumerate())
        start_ns = time.time_ns()
        spin(0.3)
        end_ns = time.time_ns()
    finally:
        sampler.stop()
    assert not sampler.running()
    out = sampler.to_json()
    assert out["method"] == "signal" and sampler.error is None
    inside = [s for ts, s in out["samples"] if start_ns <= ts <= end_ns]
    # 150 ticks are due in 0.3 s; a loaded machine may leave some out as waits for a core.
    assert len(inside) + out["waited"] >= 100, (len(inside), out["waited"])
    assert inside
    assert all(_functions_in_this_file(out, s)[-1] == "spin" for s in inside)
    # Outermost first.
    functions = _functions_in_this_file(out, inside[0])
    assert functions.index("test_the_main_thread_samples_itself_by_timer_signal") < functions.index("spin")


def test_ticks_during_a_long_c_call_each_get_a_sample_on_the_calling_line(no_waits):
    data = os.urandom(1 << 20) * 200  # 200 MiB: about 0.3-1 s of SHA-256
    sampler = StackSampler.for_current_thread(interval_ns=5 * MS)
    sampler.start()
    try:
        start_ns = time.time_ns()
        hash_for_a_while(data)
        end_ns = time.time_ns()
    finally:
        sampler.stop()
    out = sampler.to_json()
    during = [(ts, s) for ts, s in out["samples"] if start_ns <= ts <= end_ns]
    due = (end_ns - start_ns) // (5 * MS)
    # One sample per tick, each at its own tick's time (none lost to the coalesced signal), unless a tick
    # came after an interval spent mostly waiting for a core.
    assert len(during) + out["waited"] >= due - 2, (len(during), out["waited"], due)
    assert {_functions_in_this_file(out, s)[-1] for _ts, s in during} == {"hash_for_a_while"}
    times = [ts for ts, _s in during]
    assert times == sorted(times) and len(set(times)) == len(times)


def test_no_tick_arrives_after_stop():
    sampler = StackSampler.for_current_thread(interval_ns=1 * MS)
    sampler.start()
    spin(0.05)
    sampler.stop()
    kept = len(sampler.to_json()["samples"]) + sampler.waited
    spin(0.05)
    time.sleep(0.02)
    assert len(sampler.to_json()["samples"]) + sampler.waited == kept


def test_the_buffer_is_bounded_and_counts_what_it_drops(no_waits):
    sampler = StackSampler.for_current_thread(interval_ns=1 * MS)
    sampler.max_samples = 3
    sampler.start()
    spin(0.1)
    sampler.stop()
    out = sampler.to_json()
    assert out["method"] == "signal"
    assert len(out["samples"]) == 3 and out["dropped"] >= 10


def test_a_signal_the_job_handles_is_left_alone():
    first = signal_timer.usable_signal(_on_tick)
    previous = signal.signal(first, lambda *_: None)
    try:
        other = signal_timer.usable_signal(_on_tick)
        assert other is not None and other != first
    finally:
        signal.signal(first, previous)


def test_off_the_main_thread_a_sampling_thread_reads_the_stack():
    methods = []

    def worker() -> None:
        sampler = StackSampler.for_current_thread(interval_ns=2 * MS)
        sampler.start()
        spin(0.05)
        sampler.stop()
        methods.append(sampler.method)

    thread = threading.Thread(target=worker)
    thread.start()
    thread.join(30)
    assert methods == ["thread"]


def test_a_blocking_system_call_on_the_sampled_thread_is_restarted_not_failed():
    """A tick that lands in a C library's read() must not make it fail with EINTR (SA_RESTART)."""
    libc = ctypes.CDLL(None, use_errno=True)
    read_end, write_end = os.pipe()

    def write_later() -> None:
        time.sleep(0.2)
        os.write(write_end, b"x" * 8)

    writer = threading.Thread(target=write_later)
    sampler = StackSampler.for_current_thread(interval_ns=1 * MS)
    sampler.start()
    try:
        writer.start()
        buffer = ctypes.create_string_buffer(8)
        got = libc.read(read_end, buffer, 8)  # ctypes releases the GIL; the ticks hit the blocked read
        error = ctypes.get_errno()
    finally:
        sampler.stop()
        writer.join(5)
        os.close(read_end)
        os.close(write_end)
    assert got == 8, os.strerror(error)
    assert sampler.to_json()["samples"] or sampler.waited


def test_a_job_that_exits_with_the_sampler_running_exits_cleanly(tmp_path):
    """The interpreter's shutdown puts signals back to their default action (for a real-time signal: end the
    process); the timer is deleted before that."""
    script = tmp_path / "job.py"
    script.write_text(
        "import time\n"
        "from mlprof.collect.stack_sampler import StackSampler\n"
        "sampler = StackSampler.for_current_thread(interval_ns=100_000)\n"
        "sampler.start()\n"
        "assert sampler.method == 'signal'\n"
        "end = time.perf_counter() + 0.05\n"
        "while time.perf_counter() < end: pass\n"
        "import atexit\n"
        "atexit.register(lambda: time.sleep(0.05))  # runs first: shutdown takes a while\n"
        "print('done')\n")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "done"


def test_with_no_free_signal_a_sampling_thread_reads_the_stack(monkeypatch):
    """Every real-time signal taken (by the job, a library): the sampler falls back, and the job keeps its
    handlers."""
    monkeypatch.setattr(signal_timer.signal, "getsignal", lambda signum: (lambda *_: None))
    assert signal_timer.usable_signal(_on_tick) is None
    sampler = StackSampler.for_current_thread(interval_ns=2 * MS)
    sampler.start()
    try:
        spin(0.05)
    finally:
        sampler.stop()
    assert sampler.method == "thread"
    assert sampler.to_json()["method"] == "thread"


def test_the_handler_is_never_compiled_into_a_torch_compiled_model():
    """A tick inside a compiled region runs the handler there, and dynamo evaluates every new frame of the
    thread: without the guard it compiled 9 frames of the handler in 1 s of a compiled model sampled every
    0.5 ms (a recompilation the job never had)."""
    torch = pytest.importorskip("torch")
    import torch._dynamo
    from torch._dynamo.utils import counters

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = torch.nn.Linear(64, 64), torch.nn.Linear(64, 64)

        def forward(self, x):
            for _ in range(20):
                x = self.a(x)
            torch._dynamo.graph_break()  # the rest runs in a resumed frame: Python inside the compiled call
            for _ in range(20):
                x = self.b(x)
            return x

    torch._dynamo.reset()
    compiled = torch.compile(Net(), backend="eager")
    x = torch.randn(8, 64)
    compiled(x)
    compiled(x)
    frames = counters["frames"]["total"]
    sampler = StackSampler.for_current_thread(interval_ns=MS // 2)
    sampler.start()
    try:
        end = time.perf_counter() + 0.5
        while time.perf_counter() < end:
            compiled(x)
    finally:
        sampler.stop()
    assert sampler.method == "signal" and len(sampler.to_json()["samples"]) + sampler.waited > 100
    assert counters["frames"]["total"] == frames


def test_a_forked_child_never_deletes_a_timer_by_the_parent_s_id(tmp_path):
    """POSIX timers are not inherited by fork(): in the child the parent's timer id can name a timer the child
    made itself, which deleting it at the child's exit would stop."""
    sampler = StackSampler.for_current_thread(interval_ns=5 * MS)
    sampler.start()
    try:
        pid = os.fork()
        if pid == 0:  # the child: its own timer under the same id, then the parent's sampler stops
            own = signal_timer.SignalTimer(signal.SIGRTMIN + 1, threading.get_native_id(), 10**9)
            same_id = own._timer.value == sampler._timer._timer.value
            sampler._stop_timer()
            alive = signal_timer._functions()[2](own._timer) == 0 if same_id else True  # timer_delete succeeds
            os._exit(0 if alive else 1)
        _, status = os.waitpid(pid, 0)
    finally:
        sampler.stop()
    assert os.waitstatus_to_exitcode(status) == 0
