"""Reading another thread's Python stack in one C call (collect/thread_stacks.py)."""

from __future__ import annotations

import threading

from mlprof.collect.thread_stacks import ThreadStacks, parse_block


def _in_thread(target):
    """Runs ``target(ready, release)`` in a thread; returns (thread, ready, release)."""
    ready, release = threading.Event(), threading.Event()
    thread = threading.Thread(target=target, args=(ready, release), daemon=True)
    thread.start()
    assert ready.wait(10)
    return thread, release


def test_another_threads_stack_is_read_innermost_first_with_lines():
    def outer(ready, release):
        middle(ready, release)

    def middle(ready, release):
        ready.set()
        release.wait(10)  # this line is where the thread stands

    thread, release = _in_thread(outer)
    try:
        frames = ThreadStacks(thread.ident).read()
    finally:
        release.set()
        thread.join(10)
    functions = [f[2] for f in frames]
    assert functions.index("wait") < functions.index("middle") < functions.index("outer")
    (mine,) = [f for f in frames if f[2] == "middle"]
    assert mine[0] == __file__ and mine[1] > 0
    assert functions[-1] == "_bootstrap"  # threading's entry point is the outermost frame


def test_each_thread_is_told_apart_and_a_gone_thread_reads_none():
    def one(ready, release):
        ready.set()
        release.wait(10)

    def two(ready, release):
        ready.set()
        release.wait(10)

    first, release_first = _in_thread(one)
    second, release_second = _in_thread(two)
    try:
        assert "one" in [f[2] for f in ThreadStacks(first.ident).read()]
        assert "two" in [f[2] for f in ThreadStacks(second.ident).read()]
        assert "one" not in [f[2] for f in ThreadStacks(second.ident).read()]
    finally:
        release_first.set()
        release_second.set()
        first.join(10)
        second.join(10)
    assert ThreadStacks(first.ident).read() is None


def test_the_calling_thread_reads_itself_too():
    frames = ThreadStacks(threading.get_ident()).read()
    assert frames[0][2] == "read" and "test_the_calling_thread_reads_itself_too" in [f[2] for f in frames]


def test_a_dump_block_parses_frames_and_skips_what_is_not_a_frame():
    block = (b'  File "/a b/train.py", line 42 in train_step\n'
             b'  File "<frozen runpy>", line ??? in _run_code\n'
             b'  Garbage-collecting\n'
             b'  File "x.py", line 7 in <module>\n'
             b'  ...\n')
    assert parse_block(block) == (("/a b/train.py", 42, "train_step"), ("<frozen runpy>", 0, "_run_code"),
                                  ("x.py", 7, "<module>"))
    assert parse_block(b"  <no Python frame>\n") == ()


def test_a_stack_seen_before_is_not_parsed_again(monkeypatch):
    import mlprof.collect.thread_stacks as mod

    def waiting(ready, release):
        ready.set()
        release.wait(10)

    thread, release = _in_thread(waiting)
    calls = []
    real = mod.parse_block
    monkeypatch.setattr(mod, "parse_block", lambda block: calls.append(1) or real(block))
    try:
        reader = ThreadStacks(thread.ident)
        first, second = reader.read(), reader.read()
    finally:
        release.set()
        thread.join(10)
    assert first == second and len(calls) == 1
    reader.close()


def test_dumps_follow_each_other_in_the_file_and_it_starts_over_past_its_limit(monkeypatch):
    import os
    import time

    import mlprof.collect.thread_stacks as mod

    monkeypatch.setattr(mod, "_REWIND_BYTES", 4096)

    def waiting(ready, release):
        ready.set()
        release.wait(10)

    thread, release = _in_thread(waiting)
    try:
        reader = ThreadStacks(thread.ident)
        before = time.time_ns()
        reads = [reader.read() for _ in range(50)]
        sizes = os.fstat(reader._file.fileno()).st_size
    finally:
        release.set()
        thread.join(10)
    assert all(r == reads[0] and "waiting" in [f[2] for f in r] for r in reads)
    assert sizes < 4096 + 20_000  # started over instead of growing by a dump per read
    assert before <= reader.read_ns <= time.time_ns()
    reader.close()
