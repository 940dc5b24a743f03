"""work_growth at one host speed: a rise the speed probe shows too is the host slowing, not work growing.

Hand-built captures (steps.json with ``speed_probe_ns``) parsed by the real parser and advised by the real
advisor; the host's speed stretches steps and probes alike, as on a shared VM (benchmarks/host_speed.py).
"""

from __future__ import annotations

import numpy as np

from mlprof.analysis.advisor import advise
from mlprof.parse import ParseOptions, parse_path
from mlprof.tables.store import TableStore

from steps_capture import T0, write_steps_capture

MS = 1_000_000
PROBE_NS = 300_000


def _capture(root, work_ms, speed, probes=True, steps=12, seed=0):
    """Step i does ``work_ms(i)`` of work at host ``speed(i)`` (a factor on time); a probe after each step."""
    rng = np.random.default_rng(seed)
    records, t = [], T0
    for i in range(steps):
        work = int(work_ms(i) * MS * speed(i) * rng.normal(1.0, 0.01))
        record = {"step": i, "start_ns": t, "end_ns": t + work, "cpu_ns": work, "cpu_wait_ns": 0}
        if probes:
            record["speed_probe_ns"] = int(PROBE_NS * speed(i) * rng.normal(1.0, 0.01))
        records.append(record)
        t += work + 400_000
    write_steps_capture(root, records)
    return TableStore(parse_path(root, ParseOptions())[0].tables_dir)


def _growth(store) -> list:
    return [f for f in advise(store).findings if f.id == "work_growth"]


def test_a_host_slowing_step_by_step_is_not_growing_work(tmp_path):
    # The same 14 ms of work, the host 4% slower each step (14 -> 21 ms): the probe slows alike.
    store = _capture(tmp_path / "c", lambda i: 14, lambda i: 1 + 0.045 * i)
    assert _growth(store) == []


def test_work_that_grows_at_one_host_speed_is_still_growth(tmp_path):
    store = _capture(tmp_path / "c", lambda i: 14 + 0.7 * i, lambda i: 1.0)
    (f,) = _growth(store)
    assert f.evidence.metrics["growth_share"] > 0.4


def test_work_that_grows_while_the_host_speeds_up_is_growth(tmp_path):
    # +60% of work over the run on a host 20% faster by its end: the wall time rises less than the work.
    store = _capture(tmp_path / "c", lambda i: 14 * (1 + 0.06 * i), lambda i: 1 - 0.018 * i)
    assert len(_growth(store)) == 1


def test_without_probes_the_wall_time_trend_stands(tmp_path):
    store = _capture(tmp_path / "c", lambda i: 14, lambda i: 1 + 0.045 * i, probes=False)
    assert len(_growth(store)) == 1
