"""Golden tests of growth across steps (memory_growth, work_growth) on tiny traces with known numbers:
growth is named with its rate, plateaus, allocator caching and noise are not."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from mlprof.analysis.advisor import Thresholds, advise
from mlprof.analysis.growth import increase_p_value, trend
from mlprof.tables.store import TableStore, replace_table

from test_rules_golden import BASE_NS, X, _store

MB = 2**20
GIB = 2**30


def _steps(durations_us, body=None):
    """Consecutive steps of the given durations; ``body(i, t0, dur)`` adds each step's other events."""
    events, t = [], 0
    for i, dur in enumerate(durations_us):
        events.append(X(f"ProfilerStep#{i + 1}", t, dur, cat="user_annotation"))
        events.extend(body(i, t, dur) if body else [X("aten::addmm", t + 10, dur - 20)])
        t += dur
    return events


def _findings(store, rule_id):
    return [f for f in advise(store).findings if f.id == rule_id]


# ---------------------------------------------------------------- the statistics

def test_mann_kendall_p_is_exact_for_short_series():
    assert increase_p_value([1, 2, 3, 4, 5]) == pytest.approx(1 / 120)
    assert increase_p_value([1, 2, 3, 5, 4]) == pytest.approx(5 / 120)  # one fall: 1 + 4 orders of 120
    assert increase_p_value([5, 4, 3, 2, 1]) == pytest.approx(1.0)
    assert increase_p_value(list(range(50))) < 1e-12


def test_theil_sen_ignores_an_outlier_and_a_plateau_has_no_late_slope():
    t = trend(range(10), [3 * x for x in range(9)] + [1000])
    assert t.slope == pytest.approx(3.0) and t.growth == pytest.approx(27.0)
    plateau = trend(range(12), [0, 10, 20, 30, 40, 40, 40, 40, 40, 40, 40, 40])
    assert plateau.slope > 0 and plateau.late_slope == 0 and not plateau.still_growing()
    assert trend(range(4), [1, 2, 3, 4]) is None  # too few points


# ---------------------------------------------------------------- memory (host samples after the window)

def _with_job_memory(store_dir, rss_mb_of_step, steps_after=40, step_ms=100, window_steps=5,
                     available_gib=8.0, sample_ms=100):
    """Add host samples of the job's RSS after the window (``rss_mb_of_step(step)``) and the manifest's
    job_steps / last_step_end_ns to a parsed trace of ``window_steps`` steps of 10 ms."""
    window_end_ns = BASE_NS + window_steps * 10_000_000
    last_end_ns = window_end_ns + steps_after * step_ms * 1_000_000
    ts = np.arange(window_end_ns + sample_ms * 1_000_000, last_end_ns + 1, sample_ms * 1_000_000, dtype=np.int64)
    steps = window_steps + (ts - window_end_ns) / (step_ms * 1e6)
    rss = np.array([rss_mb_of_step(s) * MB for s in steps])
    n = len(ts)
    replace_table(store_dir, "counters", {
        "name": np.array(["host_memory"] * (2 * n), dtype=object),
        "series": np.array(["job_rss_bytes"] * n + ["available_bytes"] * n, dtype=object),
        "pid": np.full(2 * n, 10, dtype=np.int64), "ts_ns": np.concatenate([ts, ts]),
        "value": np.concatenate([rss, np.full(n, available_gib * GIB)]),
        "window_index": np.zeros(2 * n, dtype=np.int32)})
    with TableStore(store_dir) as s:
        meta = s.rows("SELECT key, value_json FROM metadata")
    meta += [("capture.job_steps", json.dumps(window_steps + steps_after)),
             ("capture.last_step_end_ns", json.dumps(int(last_end_ns)))]
    replace_table(store_dir, "metadata", {"key": np.array([k for k, _ in meta], dtype=object),
                                          "value_json": np.array([v for _, v in meta], dtype=object),
                                          "window_index": np.zeros(len(meta), dtype=np.int32)})


def _memory_store(tmp_path, name, rss_mb_of_step, **kw):
    with _store(tmp_path, _steps([10_000] * 5), name) as store:
        tables_dir = store.tables_dir
    _with_job_memory(tables_dir, rss_mb_of_step, **kw)
    return TableStore(tables_dir)


def test_memory_growing_every_step_is_named_with_its_rate_and_the_step_it_runs_out(tmp_path):
    # 8 MB a step from 500 MB, 8 GiB left: out of memory 1024 steps after the last sample (step 45).
    with _memory_store(tmp_path, "leak", lambda s: 500 + 8 * s) as store:
        (f,) = _findings(store, "memory_growth")
    m = f.evidence.metrics
    assert m["source"] == "rss" and m["mb_per_step"] == pytest.approx(8.0, rel=0.01)
    assert m["steps_to_oom"] == pytest.approx(1024, abs=2) and m["oom_step"] == pytest.approx(45 + 1024, abs=3)
    assert f.severity == "critical" and "8.0 MB per step" in f.title and "out of memory in ~1,02" in f.title
    assert "loss.item()" in f.fix and "--profile-memory" in f.fix


def test_slow_growth_far_from_the_limit_is_a_warning(tmp_path):
    with _memory_store(tmp_path, "slow", lambda s: 500 + 1.0 * s, available_gib=64) as store:
        (f,) = _findings(store, "memory_growth")
    assert f.severity == "warning" and f.evidence.metrics["steps_to_oom"] > Thresholds().memory_growth_critical_steps


@pytest.mark.parametrize("name,rss", [
    # A warm-up rise (allocator caches, optimizer state) that then stays flat.
    ("plateau", lambda s: 400 + 60 * min(s - 5, 8) / 8),
    # Flat with sampling noise of +-3 MB.
    ("noisy", lambda s, r=random.Random(7): 400 + r.uniform(-3, 3)),
    # Grows, but 4 MB in all: below the 16 MB worth reporting.
    ("small", lambda s: 400 + 0.1 * s),
])
def test_plateau_noise_and_small_growth_are_silent(tmp_path, name, rss):
    with _memory_store(tmp_path, name, rss) as store:
        assert _findings(store, "memory_growth") == []


@pytest.mark.parametrize("steps_after,mb_per_step", [(3, 8.0), (12, 1.8), (19, 4.0), (23, 1.55), (39, 4.0)])
def test_too_few_steps_after_the_window_are_not_judged(tmp_path, steps_after, mb_per_step):
    # 12 steps rising 1.8 MB each, and 23 rising 1.55 MB (18 judged past the trace export): a leak-free job
    # settling after its window, false alarms before. The first 20 steps after a window are left out.
    from mlprof.analysis.growth import MIN_RSS_STEPS, rss_growth

    with _memory_store(tmp_path, "short", lambda s: 500 + mb_per_step * s, steps_after=steps_after) as store:
        assert _findings(store, "memory_growth") == []
        assert f"{steps_after} steps ran after the profiled window" in rss_growth(store).reason
        assert f"{MIN_RSS_STEPS} after the first 20" in rss_growth(store).reason


def test_growth_over_twenty_steps_after_the_first_twenty_is_judged(tmp_path):
    with _memory_store(tmp_path, "twenty", lambda s: 500 + 4 * s, steps_after=40) as store:
        (f,) = _findings(store, "memory_growth")
        assert f.evidence.metrics["mb_per_step"] == pytest.approx(4.0, rel=0.05)


# ---------------------------------------------------------------- memory (allocator events)

def _mem(ts, size, addr, total, step_ops=None):
    return {"ph": "i", "s": "t", "name": "[memory]", "pid": 10, "tid": 11, "ts": ts, "cat": "cpu_instant_event",
            "args": {"Total Reserved": total, "Total Allocated": total, "Bytes": size, "Addr": addr,
                     "Device Type": 0, "Device Id": -1}}


def _allocator_steps(kept_bytes, n=6):
    """Steps of 10 ms: an addmm allocating 4 MB freed in the same step, and a relu allocating ``kept_bytes``
    (step 1 also allocates 32 MB once and keeps it: Adam's state, made on the first step)."""
    def body(i, t0, dur):
        total = body.total
        ev = [X("aten::addmm", t0 + 100, 1_000), _mem(t0 + 200, 4 * MB, 10_000 + i, total + 4 * MB),
              _mem(t0 + 900, -4 * MB, 10_000 + i, total)]
        if kept_bytes:
            ev += [X("aten::relu", t0 + 2_000, 500), _mem(t0 + 2_100, kept_bytes, 20_000 + i, total + kept_bytes)]
            total += kept_bytes
        if i == 0:
            ev += [X("aten::zeros_like", t0 + 3_000, 500), _mem(t0 + 3_100, 32 * MB, 30_000, total + 32 * MB)]
            total += 32 * MB
        body.total = total
        return ev

    body.total = 0
    return _steps([10_000] * n, body)


def test_blocks_each_step_keeps_are_memory_growth_by_op(tmp_path):
    with _store(tmp_path, _allocator_steps(6 * MB), "kept") as store:
        (f,) = _findings(store, "memory_growth")
    m = f.evidence.metrics
    assert m["source"] == "allocator" and m["retained_median_bytes"] == 6 * MB
    assert m["judged_steps"] == 5 and m["retained_steps"] == 5
    # The live total rises 6 MB a step after step 1; the relus' blocks are the ones never freed.
    assert m["mb_per_step"] == pytest.approx(6.0)
    assert f.evidence.ops[0]["op"] == "aten::relu" and f.evidence.ops[0]["bytes"] == 5 * 6 * MB
    assert "never freed: aten::relu" in f.title


def test_allocator_caching_and_a_one_off_allocation_are_silent(tmp_path):
    # Only the 32 MB made once in the first step stays: no step-after-step growth.
    with _store(tmp_path, _allocator_steps(0), "once") as store:
        assert _findings(store, "memory_growth") == []


# ---------------------------------------------------------------- work

def _cat_steps(durations_us):
    """Each step: a model op of fixed time and a cat whose time is the rest of the step."""
    return _steps(durations_us, lambda i, t0, dur: [X("aten::addmm", t0 + 10, 5_000),
                                                    X("aten::cat", t0 + 5_100, dur - 5_200)])


def test_step_time_growing_with_the_step_names_the_op_that_grows(tmp_path):
    # 6 ms plus 1 ms more of cat every step: 6..13 ms over 8 steps.
    with _store(tmp_path, _cat_steps([6_000 + 1_000 * i for i in range(8)]), "cat") as store:
        findings = advise(store).findings
    (f,) = [x for x in findings if x.id == "work_growth"]
    outliers = [x for x in findings if x.id == "step_outliers"]
    m = f.evidence.metrics
    assert m["ns_per_step"] == 1_000_000 and m["first_step_ns"] == 6_000_000 and m["op"] == "aten::cat"
    assert m["op_ns_per_step"] == 1_000_000 and m["steps"] == 8
    # The line rises 7 ms over steps 1-8 (117% of the first): critical. 28 ms of the 76 ms is the growth; the
    # time at stake is all of the growing cat's, 34.4 ms, which dominant_op also names: growth, its cause, first.
    assert f.severity == "critical" and m["excess_ns"] == 28_000_000 and f.impact_ns == 34_400_000
    assert f.share == pytest.approx(34.4 / 76, abs=1e-4)
    (dominant,) = [x for x in findings if x.id == "dominant_op" and x.evidence.metrics["op"] == "aten::cat"]
    assert dominant.share == pytest.approx(f.share) and findings.index(f) < findings.index(dominant)
    assert f.title.startswith("Step time grows 1.00 ms per step (117% over steps 1-8), in aten::cat")
    # The late steps are not periodic outliers: step_outliers, if it speaks, defers.
    assert all(o.severity == "info" for o in outliers)


@pytest.mark.parametrize("name,durations", [
    ("constant", [8_000] * 10),
    # Constant work with +-15% noise.
    ("noisy", [int(8_000 * (1 + random.Random(3).uniform(-0.15, 0.15))) for _ in range(10)]),
    # Warm-up: slow first steps, then steady.
    ("warmup", [20_000, 12_000, 9_000, 8_000, 8_100, 7_900, 8_000, 8_050]),
    # A rise then a plateau (a cache filling up).
    ("plateau", [6_000, 7_000, 8_000, 9_000, 9_000, 9_000, 9_000, 9_000, 9_000, 9_000]),
])
def test_constant_noisy_warmup_and_plateau_steps_are_not_growth(tmp_path, name, durations):
    with _store(tmp_path, _cat_steps(durations), name) as store:
        assert [f for f in _findings(store, "work_growth") if f.severity != "info"] == []


def test_three_rising_steps_are_too_few_and_say_so(tmp_path):
    with _store(tmp_path, _cat_steps([6_000, 9_000, 12_000]), "three") as store:
        (f,) = _findings(store, "work_growth")
    assert f.severity == "info" and "too few steps" in f.title and "--active" in f.fix


def test_device_allocator_growth_counts_steps_to_the_devices_memory(tmp_path):
    from mlprof.parse import ParseOptions, parse_path

    def cuda_mem(ts, size, addr, total):
        return {"ph": "i", "s": "t", "name": "[memory]", "pid": 10, "tid": 11, "ts": ts, "cat": "cpu_instant_event",
                "args": {"Total Reserved": total, "Total Allocated": total, "Bytes": size, "Addr": addr,
                         "Device Type": 1, "Device Id": 0}}

    def body(i, t0, dur):
        return [X("aten::mm", t0 + 100, 500), cuda_mem(t0 + 200, 10 * MB, 50_000 + i, (i + 1) * 10 * MB)]

    path = tmp_path / "cuda.pt.trace.json"
    path.write_text(json.dumps({"schemaVersion": 1, "baseTimeNanoseconds": BASE_NS,
                                "deviceProperties": [{"id": 0, "name": "GPU", "totalGlobalMem": GIB}],
                                "traceEvents": _steps([10_000] * 6, body)}))
    with TableStore(parse_path(path, ParseOptions(output_dir=tmp_path / "cuda_out"))[0].tables_dir) as store:
        (f,) = _findings(store, "memory_growth")
    m = f.evidence.metrics
    # 10 MB a step; 60 MB live after step 6 of a 1 GiB device: (1024 - 60) / 10 = 96.4 steps left.
    assert m["device_type"] == 1 and m["capacity_bytes"] == GIB and m["mb_per_step"] == pytest.approx(10.0)
    assert m["steps_to_oom"] == 96 and m["oom_step"] == 6 + 96
    assert f.severity == "critical" and f.title.startswith("Device 0 allocator memory grows 10.0 MB per step")
    assert f.evidence.ops[0]["op"] == "aten::mm"


def test_a_big_phase_that_only_creeps_is_named_by_its_own_rule_first(tmp_path):
    # 2 ms of ops and 18 ms of Python outside ops, the Python time creeping 0.4 ms a step (18 -> 22.4 ms over
    # 12 steps, +24%: a per-step torch.save slowing as the page cache fills). The step grows, so work_growth
    # speaks, but only for the excess: the 18 ms a step is host_outside_ops' finding, and it comes first.
    def body(i, t0, dur):
        return [X("aten::addmm", t0 + 10, 2_000)]
    durations = [20_000 + 400 * i for i in range(12)]
    with _store(tmp_path, _steps(durations, body), "creep") as store:
        findings = advise(store).findings
    (growth,) = [f for f in findings if f.id == "work_growth"]
    assert growth.evidence.metrics["phase"] == "python" and growth.evidence.metrics["op"] is None
    assert growth.impact_ns == growth.evidence.metrics["excess_ns"], "growth claims its excess, not the phase"
    code = [f for f in findings if f.severity in ("critical", "warning")]
    assert code[0].id == "host_outside_ops", [f.id for f in code]
    assert findings.index(code[0]) < findings.index(growth)


def test_a_rise_spread_over_every_phase_is_the_host_slowing_not_growing_work(tmp_path):
    # Forward, backward and the Python between them all 4% slower each step (a loaded host), none carrying
    # half of the rise: an info line that says so, not a warning about growing work.
    def body(i, t0, dur):
        part = (dur - 30) // 3
        return [X("aten::addmm", t0 + 10, part),
                X("autograd::engine::evaluate_function: AddmmBackward0", t0 + 10 + 2 * part, part)]
    durations = [int(3_000 * (1 + 0.04 * i)) for i in range(20)]
    with _store(tmp_path, _steps(durations, body), "spread") as store:
        (f,) = _findings(store, "work_growth")
    assert f.severity == "info" and f.evidence.metrics["spread"], (f.severity, f.title)
    assert "spread over the whole step" in f.title


def test_an_op_that_slows_with_the_rest_of_the_step_is_the_host_not_growing_work(tmp_path):
    # The step's biggest op carries most of a 4%-a-step rise, but the rest of the step rises alike: the same
    # work done slower (a loaded host), not more work. Info, and it says so.
    def body(i, t0, dur):
        big = int((dur - 40) * 0.7)
        return [X("aten::addmm", t0 + 10, big), X("aten::relu", t0 + 20 + big, dur - 40 - big)]
    durations = [int(3_000 * (1 + 0.04 * i)) for i in range(20)]
    with _store(tmp_path, _steps(durations, body), "alike") as store:
        (f,) = _findings(store, "work_growth")
    assert f.severity == "info" and f.evidence.metrics["rest_rose_alike"], (f.severity, f.title)
    assert "rest of the step rising alike" in f.title


def test_a_jump_between_two_flat_levels_is_not_growing_work(tmp_path):
    # 40 steps of 8 ms (+-2%), then from step 25 on 11 ms: the machine got busier (or the job changed phase)
    # mid-window. The trend is steep and its p tiny, but it rises in one jump: an info line that says so.
    rng = random.Random(7)
    durations = [int((8_000 if i < 25 else 11_000) * (1 + rng.uniform(-0.02, 0.02))) for i in range(40)]
    with _store(tmp_path, _cat_steps(durations), "jump") as store:
        (f,) = _findings(store, "work_growth")
    assert f.severity == "info" and f.evidence.metrics["jump_at_step"] == 26, f.title  # steps are numbered from 1
    assert "in one jump at step 26" in f.title


def test_level_shifts_tell_jumps_from_a_ramp():
    from mlprof.analysis.growth import level_shifts

    rng = np.random.default_rng(0)
    x = np.arange(200)
    jump = level_shifts(x, 4 + 1.5 * (x >= 120) + rng.normal(0, 0.3, 200))
    assert jump is not None and jump.at_x == (120,) and jump.levels[1] - jump.levels[0] == pytest.approx(1.5, abs=0.2)
    # Two jumps, the last level only 4 steps long (a default-threads job whose host got busier at its end).
    x = np.arange(6, 72)
    stairs = 23 + 6 * (x >= 18) + 20 * (x >= 68) + rng.normal(0, 2, len(x))
    two = level_shifts(x, stairs)
    assert two is not None and len(two.at_x) == 2 and abs(two.at_x[0] - 18) <= 2 and two.at_x[1] == 68, two
    # Ramps, steep or noisy, outliers and all, and a curve, are no jump.
    x = np.arange(200)
    assert level_shifts(x, 4 + 0.02 * x + rng.normal(0, 0.3, 200)) is None
    assert level_shifts(x, 4 + 0.005 * x + rng.normal(0, 0.5, 200)) is None
    assert level_shifts(x, 4 + 0.02 * x + (rng.random(200) < 0.05) * 5) is None
    assert level_shifts(x, 4 + 0.0001 * x ** 2 + rng.normal(0, 0.3, 200)) is None
    assert level_shifts(range(8), [1, 1, 1, 1, 2, 2, 2, 2]) is None  # too few points to call it


def _flagged_as_growth(x, y) -> bool:
    from mlprof.analysis.growth import trend

    t = trend(x, y)
    return t.slope > 0 and t.p_value < 0.01 and t.growth / t.at(t.first_x) >= 0.2


def test_level_shifts_on_simulated_ramps_and_staircases():
    # What the rule meets: step times that rise 25-300% over 20-70 steps with 2-25% noise, half with a
    # few slow steps (GC, a checkpoint), against staircases of one or two 20-100% jumps, the same noise.
    # Only series the growth test flags count. A ramp read as jumps is growing work missed (its finding
    # drops to info); a staircase read as a ramp is a false alarm.
    from mlprof.analysis.growth import level_shifts

    rng = np.random.default_rng(7)
    ramps, stairs = [], []
    for _ in range(120):
        n = int(rng.integers(20, 70))
        x = np.arange(6, 6 + n, dtype=float)
        noise = rng.uniform(0.02, 0.25) * 20
        ramp = 20 + 20 * rng.uniform(0.25, 3.0) * (x - x[0]) / (x[-1] - x[0]) + rng.normal(0, noise, n)
        if rng.random() < 0.5:
            ramp[rng.choice(n, size=max(1, n // 20), replace=False)] += 20 * rng.uniform(0.5, 3)
        if _flagged_as_growth(x, ramp):
            ramps.append(level_shifts(x, ramp) is not None)
        n = int(rng.integers(30, 70))
        x = np.arange(6, 6 + n, dtype=float)
        stair = 20 + rng.normal(0, noise, n)
        if rng.random() < 0.5:
            stair[rng.choice(n, size=max(1, n // 20), replace=False)] += 20 * rng.uniform(0.5, 3)
        for cut in rng.choice(np.arange(3, n - 3), size=int(rng.integers(1, 3)), replace=False):
            stair[cut:] += 20 * rng.uniform(0.2, 1.0)
        if _flagged_as_growth(x, stair):
            stairs.append(level_shifts(x, stair) is not None)
    assert len(ramps) >= 100 and len(stairs) >= 80, (len(ramps), len(stairs))
    assert np.mean(ramps) <= 0.03, np.mean(ramps)
    assert np.mean(stairs) >= 0.7, np.mean(stairs)


def test_a_slope_under_ten_microseconds_a_step_is_written_in_microseconds(tmp_path):
    # 8 us more of cat every step over 200 steps from 6 ms (+27%): "0.01 ms per step" hid its size.
    with _store(tmp_path, _cat_steps([6_000 + 8 * i for i in range(200)]), "slow") as store:
        (f,) = _findings(store, "work_growth")
    assert f.title.startswith("Step time grows 8.0 us per step (27% over steps 1-200)"), f.title
