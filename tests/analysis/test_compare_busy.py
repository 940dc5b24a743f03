"""compare on a busy host: the wait for a core, measured per step, is taken out of the verdict.

Hand-built captures (steps.json with ``cpu_wait_ns``, host samples) parsed by the
real parser, compared by the real ``compare``. The numbers mimic what
benchmarks/compare_verdicts.py measured on a 2-vCPU VM with shell loops on
every core in another session.
"""

from __future__ import annotations

import json

import numpy as np

from mlprof.analysis.compare import compare
from mlprof.analysis.compare_load import BUSY_MIN_CHANGE, run_load
from mlprof.parse import ParseOptions, parse_path
from mlprof.tables.store import TableStore

from steps_capture import T0, write_steps_capture

MS = 1_000_000


def _capture(root, work_ms, wait_ms, others_percent, seed, waits_recorded=True):
    """Steps of ``work_ms`` (noisy) plus ``wait_ms`` waiting for a core; other processes at ``others_percent``."""
    rng = np.random.default_rng(seed)
    steps, t = [], T0
    for i in range(20):
        work = int(work_ms * MS * rng.normal(1.0, 0.03))
        wait = int(wait_ms * MS * rng.uniform(0.5, 1.5))
        step = {"step": i, "start_ns": t, "end_ns": t + work + wait, "cpu_ns": work}
        if waits_recorded:
            step["cpu_wait_ns"] = wait
        steps.append(step)
        t += work + wait
    write_steps_capture(root, steps)
    job = 100.0 * work_ms / (work_ms + wait_ms)
    samples = [{"ts_ns": ts, "cpu_percent": min((job + others_percent) / 2, 100.0), "job_cpu_percent": job,
                "cpu_count": 2, "runnable_threads": 1 + int(others_percent // 50), "job_threads": 1}
               for ts in range(T0, t + 100 * MS, 100 * MS)]
    (root / "host_samples.json").write_text(json.dumps(samples))
    return TableStore(parse_path(root, ParseOptions())[0].tables_dir)


def test_steps_table_carries_the_recorded_cpu_and_wait(tmp_path):
    store = _capture(tmp_path / "a", work_ms=10, wait_ms=3, others_percent=120, seed=1)
    rows = store.rows("SELECT dur_ns, cpu_ns, cpu_wait_ns FROM steps ORDER BY step")
    assert len(rows) == 20 and all(dur == cpu + wait for dur, cpu, wait in rows)
    load = run_load(store)
    assert load.busy and load.waited and 0.15 < load.wait_share < 0.30
    assert load.ready_ns_by_step == [cpu for _, cpu, _ in rows]


def test_the_same_code_waiting_more_for_a_core_is_no_change(tmp_path):
    base = _capture(tmp_path / "base", work_ms=10, wait_ms=1, others_percent=110, seed=2)
    new = _capture(tmp_path / "new", work_ms=10, wait_ms=6, others_percent=120, seed=3)
    wall = compare(base, new, top=5)
    assert wall.verdict.verdict == "no change"
    assert "waited for a CPU core" in wall.verdict.sentence and "load differed" in wall.verdict.sentence
    assert wall.facts["load"]["new"]["busy"] is True
    assert any("wall time says NEW is" in w for w in wall.warnings)  # what wall time alone would have said


def test_twice_the_work_on_a_busy_host_is_slower(tmp_path):
    base = _capture(tmp_path / "base", work_ms=10, wait_ms=3, others_percent=110, seed=4)
    new = _capture(tmp_path / "new", work_ms=20, wait_ms=3, others_percent=110, seed=5)
    result = compare(base, new, top=5)
    assert result.verdict.verdict == "slower" and 90 < result.verdict.change_pct < 110


def test_a_busy_host_with_the_same_share_for_both_runs_says_who_took_the_cores(tmp_path):
    base = _capture(tmp_path / "base", work_ms=10, wait_ms=2, others_percent=110, seed=12)
    new = _capture(tmp_path / "new", work_ms=10, wait_ms=2, others_percent=100, seed=13)
    result = compare(base, new, top=5)
    assert result.verdict.verdict == "no change"
    assert "other processes used 110% (BASE) and 100% (NEW) of a core during the steps" in result.verdict.sentence


def test_on_a_busy_host_a_change_under_the_wider_margin_is_not_called(tmp_path):
    # +25% of work: beyond the CPU margin on a quiet host, within what a shared core varies on a busy one.
    base = _capture(tmp_path / "base", work_ms=10, wait_ms=1, others_percent=110, seed=6)
    new = _capture(tmp_path / "new", work_ms=12.5, wait_ms=1, others_percent=110, seed=7)
    result = compare(base, new, top=5)
    assert result.verdict.verdict == "no change"
    assert f"beyond the {100 * BUSY_MIN_CHANGE:g}% margin" in result.verdict.sentence


def test_a_quiet_host_keeps_the_wall_verdict(tmp_path):
    base = _capture(tmp_path / "base", work_ms=10, wait_ms=0, others_percent=5, seed=8)
    new = _capture(tmp_path / "new", work_ms=15, wait_ms=0, others_percent=5, seed=9)
    result = compare(base, new, top=5)
    assert result.verdict.verdict == "slower" and "judged on" not in result.verdict.sentence
    assert result.warnings == [] or not any("busy" in w for w in result.warnings)


def test_captures_without_recorded_waits_fall_back_to_cpu_time_from_samples(tmp_path):
    base = _capture(tmp_path / "base", work_ms=10, wait_ms=1, others_percent=110, seed=10, waits_recorded=False)
    new = _capture(tmp_path / "new", work_ms=10, wait_ms=10, others_percent=110, seed=11, waits_recorded=False)
    assert run_load(new).ready_ns_by_step is None
    result = compare(base, new, top=5)
    assert result.verdict.verdict == "no change" and "CPU time per step" in result.verdict.sentence
