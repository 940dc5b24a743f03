"""compare at one host speed: steps divided by the probe timed beside them (analysis/compare_speed.py).

Hand-built captures (steps.json with ``speed_probe_ns``) parsed by the real parser
and compared by the real ``compare``. The host's speed factor stretches steps and
probes alike, as measured on a 2-vCPU VM (benchmarks/host_speed.py --interleaved):
runs of the same code 40% apart in step time, 2-12% apart once divided.
"""

from __future__ import annotations

import json
import re

import numpy as np

from mlprof.analysis.compare import compare
from mlprof.analysis.compare_speed import MIN_PROBES, SPEED_MEASURE, speed_steps
from mlprof.parse import ParseOptions, parse_path
from mlprof.tables.store import TableStore

from steps_capture import T0, write_steps_capture

MS = 1_000_000
PROBE_NS = 300_000


def _capture(root, work_ms, speed, seed, probes_every=1, steps=24, wait_ms=0.0):
    """Steps of ``work_ms`` of work, run at host ``speed`` (a factor on time: a function of the step index,
    or a number); a probe after every ``probes_every``-th step (0: none), stretched by the same factor."""
    rng = np.random.default_rng(seed)
    factor = speed if callable(speed) else (lambda i: speed)
    records, t = [], T0
    for i in range(steps):
        work = int(work_ms * MS * factor(i) * rng.normal(1.0, 0.02))
        wait = int(wait_ms * MS * rng.uniform(0.5, 1.5))
        record = {"step": i, "start_ns": t, "end_ns": t + work + wait, "cpu_ns": work, "cpu_wait_ns": wait}
        if probes_every and i % probes_every == 0:
            record["speed_probe_ns"] = int(PROBE_NS * factor(i) * rng.normal(1.0, 0.03))
        records.append(record)
        t += work + wait + 400_000
    write_steps_capture(root, records)
    return TableStore(parse_path(root, ParseOptions())[0].tables_dir)


def test_the_same_code_on_a_slower_host_is_no_change(tmp_path):
    base = _capture(tmp_path / "base", work_ms=50, speed=1.0, seed=1)
    new = _capture(tmp_path / "new", work_ms=50, speed=1.4, seed=2)
    result = compare(base, new, top=5)
    v = result.verdict
    assert v.verdict == "no change" and v.measure == SPEED_MEASURE and abs(v.change_pct) < 5
    assert "one host speed" in v.sentence
    assert re.search(r"a fixed probe took 29\d us during BASE's steps and 4[12]\d us during NEW's", v.sentence)
    assert any("wall time says NEW is" in w and "slower" in w for w in result.warnings)


def test_twice_the_work_on_a_slower_host_is_slower_by_the_work(tmp_path):
    base = _capture(tmp_path / "base", work_ms=50, speed=1.3, seed=3)
    new = _capture(tmp_path / "new", work_ms=100, speed=1.0, seed=4)
    v = compare(base, new, top=5).verdict
    assert v.verdict == "slower" and v.measure == SPEED_MEASURE and 90 < v.change_pct < 110


def test_a_quarter_more_work_on_a_faster_host_is_still_slower(tmp_path):
    # Wall time alone: 62.5 ms x 0.8 = 50 ms against 50 ms, no change.
    base = _capture(tmp_path / "base", work_ms=50, speed=1.0, seed=5)
    new = _capture(tmp_path / "new", work_ms=62.5, speed=0.8, seed=6)
    result = compare(base, new, top=5)
    assert result.verdict.verdict == "slower" and 20 < result.verdict.change_pct < 30


def test_a_speed_change_inside_a_run_is_followed_step_by_step(tmp_path):
    # NEW's host slows by half after its 12th step; a run-wide median probe would misjudge both halves.
    base = _capture(tmp_path / "base", work_ms=50, speed=1.0, seed=7)
    new = _capture(tmp_path / "new", work_ms=50, speed=lambda i: 1.0 if i < 12 else 1.5, seed=8)
    per_probe = speed_steps(new).per_probe
    assert max(per_probe) / min(per_probe) < 1.25  # the steps right at the change lean on both sides' probes
    assert compare(base, new, top=5).verdict.verdict == "no change"


def test_wait_for_a_core_is_left_out_before_dividing(tmp_path):
    base = _capture(tmp_path / "base", work_ms=50, speed=1.0, seed=9)
    new = _capture(tmp_path / "new", work_ms=50, speed=1.2, seed=10, wait_ms=30)
    v = compare(base, new, top=5).verdict
    assert v.verdict == "no change" and v.measure == SPEED_MEASURE


def test_too_few_probes_leave_the_verdict_to_the_other_measures(tmp_path):
    base = _capture(tmp_path / "base", work_ms=50, speed=1.0, seed=11)
    new = _capture(tmp_path / "new", work_ms=50, speed=1.0, seed=12, probes_every=24 // (MIN_PROBES - 1) + 1)
    assert speed_steps(new) is None and speed_steps(base).probes == 24
    v = compare(base, new, top=5).verdict
    assert v.measure != SPEED_MEASURE


def test_a_capture_without_probes_reads_as_none(tmp_path):
    assert speed_steps(_capture(tmp_path / "old", work_ms=20, speed=1.0, seed=13, probes_every=0)) is None


def test_several_runs_per_side_are_divided_run_by_run(tmp_path):
    speeds_base, speeds_new = (1.0, 1.3, 1.1), (1.25, 1.0, 1.4)
    base = [_capture(tmp_path / f"b{i}", work_ms=50, speed=s, seed=20 + i) for i, s in enumerate(speeds_base)]
    same = [_capture(tmp_path / f"n{i}", work_ms=50, speed=s, seed=30 + i) for i, s in enumerate(speeds_new)]
    more = [_capture(tmp_path / f"m{i}", work_ms=75, speed=s, seed=40 + i) for i, s in enumerate(speeds_new)]
    v = compare(base, same, top=5).verdict
    assert v.verdict == "no change" and v.measure == SPEED_MEASURE and v.base_runs == 3
    v = compare(base, more, top=5).verdict
    assert v.verdict == "slower" and 40 < v.change_pct < 60
