"""Monitor mode's pieces without a job: the bounded step series and the triggers, on synthetic steps."""

from __future__ import annotations

import os

import pytest

from mlprof.capture.job_series import HEADER, RECORD_BYTES, SeriesWriter, read_series
from mlprof.collect.monitor_triggers import ARM_AFTER, CHECK_EVERY, GROWTH_CHECKS, Triggers

MS = 1_000_000


def _add(writer: SeriesWriter, step: int, wall_ns: int) -> None:
    writer.add(step, step * 10 * MS, wall_ns, wall_ns // 2, 0, 0, 0, 100 + step, 0, 0)


def test_a_long_job_keeps_every_step_within_the_cap(tmp_path):
    path = tmp_path / "job_steps.bin"
    cap, steps = 1000, 300_000
    writer = SeriesWriter(path, cap_records=cap)
    largest = 0
    for step in range(steps):
        _add(writer, step, (step % 7 + 1) * MS)
        if step % 997 == 0:
            largest = max(largest, os.path.getsize(path))
    writer.close()
    largest = max(largest, os.path.getsize(path))
    assert largest <= len(HEADER) + cap * RECORD_BYTES
    records = read_series(path)
    assert len(records) <= cap
    assert writer.compactions >= 8  # 300,000 steps into 1,000 records: 512 steps a record at the end
    # Every step is in exactly one record, in order, and the times add up.
    assert sum(r[1] for r in records) == steps
    firsts = [r[0] for r in records]
    assert firsts == sorted(firsts) and firsts[0] == 0
    assert all(b[0] == a[0] + a[1] for a, b in zip(records, records[1:]))
    assert sum(r[3] for r in records) == sum((s % 7 + 1) * MS for s in range(steps))
    assert max(r[8] for r in records) == 100 + steps - 1  # memory: the largest reading is kept


def test_a_short_job_keeps_one_record_per_step_and_a_torn_tail_is_dropped(tmp_path):
    path = tmp_path / "job_steps.bin"
    writer = SeriesWriter(path, cap_records=1000)
    for step in range(10):
        _add(writer, step, 2 * MS)
    writer.close()
    with open(path, "ab") as f:
        f.write(b"\0" * (RECORD_BYTES // 2))  # a job killed mid-write
    records = read_series(path)
    assert [r[0] for r in records] == list(range(10)) and all(r[1] == 1 for r in records)


def test_a_file_that_is_not_a_series_is_refused(tmp_path):
    path = tmp_path / "job_steps.bin"
    path.write_bytes(b"not a series at all")
    with pytest.raises(ValueError, match="bad header"):
        read_series(path)


def _feed(triggers: Triggers, walls_ns, rss=lambda step: 0, waits=lambda step: 0):
    for step, wall in enumerate(walls_ns):
        found = triggers.observe(step, wall, waits(step), rss(step))
        if found is not None:
            return step, found
    return None


def test_steady_steps_with_noise_trigger_nothing():
    walls = [(10 + (s * 7919) % 5 / 10) * MS for s in range(2000)]  # 10.0-10.4 ms
    assert _feed(Triggers(), walls) is None


def test_a_stall_every_fifth_step_is_slow_steps():
    walls = [(40 if s >= 100 and s % 5 == 0 else 10) * MS for s in range(300)]
    step, (reason, detail) = _feed(Triggers(), walls)
    assert reason == "slow_steps" and 100 <= step <= 115, (step, detail)


def test_a_step_that_waited_for_a_core_is_not_an_anomaly():
    # Every fifth step is 30 ms longer, all of it waiting for a core: the machine's doing.
    walls = [(40 if s >= 100 and s % 5 == 0 else 10) * MS for s in range(300)]
    waits = lambda s: 30 * MS if s >= 100 and s % 5 == 0 else 0  # noqa: E731
    assert _feed(Triggers(), walls, waits=waits) is None


def test_a_lasting_slowdown_is_a_throughput_drop():
    walls = [(25 if s >= 150 else 10) * MS for s in range(400)]
    step, (reason, _detail) = _feed(Triggers(), walls)
    assert reason == "throughput_drop" and 150 <= step <= 160


def test_memory_that_keeps_growing_is_memory_growth():
    walls = [10 * MS] * 1000
    step, (reason, _detail) = _feed(Triggers(), walls, rss=lambda s: (300 << 20) + max(0, s - 100) * (1 << 20))
    assert reason == "memory_growth"
    assert step <= 100 + (GROWTH_CHECKS + 1) * CHECK_EVERY + ARM_AFTER


def test_memory_that_grows_then_stays_is_not_growth():
    walls = [10 * MS] * 1000
    assert _feed(Triggers(), walls, rss=lambda s: (300 << 20) + min(s, 60) * (1 << 20)) is None
