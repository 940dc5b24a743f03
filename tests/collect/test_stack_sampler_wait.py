"""The stack sampler leaves out samples after intervals the thread spent waiting for a CPU core."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from mlprof.collect.stack_sampler import StackSampler, mostly_waited

MS = 1_000_000


def test_mostly_waited_is_over_half_the_interval_ready_with_no_core():
    assert mostly_waited((0, 100), (10 * MS, 100 + 6 * MS))
    assert not mostly_waited((0, 100), (10 * MS, 100 + 4 * MS))
    assert not mostly_waited((0, 0), (10 * MS, 5 * MS))  # exactly half: kept
    assert not mostly_waited(None, (10 * MS, 9 * MS))  # not measured: kept
    assert not mostly_waited((10 * MS, 0), (10 * MS, 0))


def _can_pin() -> bool:
    return hasattr(os, "sched_setaffinity") and Path(f"/proc/self/task/{threading.get_native_id()}/schedstat").exists()


@pytest.mark.skipif(not _can_pin(), reason="needs Linux thread affinity and schedstat")
def test_a_thread_sharing_its_core_with_two_busy_processes_loses_its_samples():
    core = min(os.sched_getaffinity(0))
    spin = "import os, time\nos.sched_setaffinity(0, {%d})\nend = time.time() + 20\nwhile time.time() < end: pass\n" % core
    hogs = [subprocess.Popen([sys.executable, "-c", spin]) for _ in range(2)]
    ready = threading.Event()
    stop = threading.Event()
    ident: list[tuple[int, int]] = []

    def worker() -> None:
        os.sched_setaffinity(0, {core})  # this thread only
        ident.append((threading.get_ident(), threading.get_native_id()))
        ready.set()
        x = 0
        while not stop.is_set():
            x += 1

    thread = threading.Thread(target=worker, daemon=True)
    try:
        time.sleep(0.3)  # the hogs are running and pinned
        thread.start()
        ready.wait(5)
        sampler = StackSampler(*ident[0], interval_ns=10 * MS)
        sampler.start()
        time.sleep(1.5)
        sampler.stop()
    finally:
        stop.set()
        for hog in hogs:
            hog.kill()
            hog.wait()
        thread.join(5)
    out = sampler.to_json()
    # On one core with two busy loops the thread runs about a third of the time.
    assert out["waited"] >= 20, out["waited"]
    assert out["waited"] > len(out["samples"]), (out["waited"], len(out["samples"]))


def test_a_sleeping_thread_keeps_its_samples():
    ident: list[tuple[int, int]] = []
    stop = threading.Event()

    def sleeper() -> None:
        ident.append((threading.get_ident(), threading.get_native_id()))
        while not stop.is_set():
            time.sleep(0.05)

    thread = threading.Thread(target=sleeper, daemon=True)
    thread.start()
    while not ident:
        time.sleep(0.01)
    sampler = StackSampler(*ident[0], interval_ns=10 * MS)
    sampler.start()
    assert sampler.running()
    time.sleep(0.5)
    sampler.stop()
    assert not sampler.running()
    stop.set()
    thread.join(5)
    out = sampler.to_json()
    # Sleeping is not waiting for a core: the samples stay (the bar leaves room for a busy machine).
    assert len(out["samples"]) >= 20 and out["waited"] <= len(out["samples"]) // 2, out
