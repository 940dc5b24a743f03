"""Compare as a measuring instrument: distributions, a verdict beyond noise, a noise-aware gate, warnings.

Golden tests: synthetic step-time distributions, either straight into the
statistics or written as tiny inline Kineto traces (a DataLoader span and a
forward annotation per step) and parsed like any trace.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from mlprof.analysis.compare import compare
from mlprof.analysis.run_facts import fact_warnings, facts_from_metadata
from mlprof.analysis.stats import MIN_STEPS, describe, relative_verdict, shift
from mlprof.cli.exit_codes import EXIT_INCONCLUSIVE, EXIT_SLOWER
from mlprof.parse import ParseOptions, parse_path
from mlprof.tables.store import TableStore
from trace_events import BASE_NS, X

MS = 1_000  # trace times are in us


def _noisy(rng, n, ms, cv=0.05):
    return ms * 1e6 * (1 + cv * rng.standard_normal(n))


# -- the statistics -------------------------------------------------------------------------------

def test_distribution_is_robust_median_iqr_mad():
    d = describe([10, 11, 12, 13, 100])
    assert (d.count, d.median_ns, d.mean_ns, d.min_ns, d.max_ns) == (5, 12, 29.2, 10, 100)
    assert (d.q1_ns, d.q3_ns, d.iqr_ns, d.mad_ns) == (11, 13, 2, 1)
    assert describe([]) is None


def test_twice_as_slow_is_slower_with_an_interval_excluding_zero():
    rng = np.random.default_rng(1)
    base = _noisy(rng, 12, 20)
    v = relative_verdict(base, _noisy(rng, 12, 40))
    assert v.verdict == "slower" and 80 < v.change_pct < 120 and v.low_pct > 0 and v.high_pct > v.low_pct
    assert v.sentence.startswith("NEW is ") and "slower (95% CI" in v.sentence and "12 vs 12 steps" in v.sentence
    back = relative_verdict(_noisy(rng, 12, 40), base)
    assert back.verdict == "faster" and back.high_pct < 0 and -60 < back.change_pct < -40
    assert "faster (95% CI" in back.sentence


def test_same_distribution_twice_is_no_change():
    rng = np.random.default_rng(2)
    v = relative_verdict(_noisy(rng, 20, 30, cv=0.1), _noisy(rng, 20, 30, cv=0.1))
    assert v.verdict == "no change" and v.low_pct < 0 < v.high_pct
    assert v.sentence.startswith("no change beyond noise:")


def test_a_steady_shift_under_the_margin_is_no_change_and_one_over_it_is_not():
    rng = np.random.default_rng(3)
    base = _noisy(rng, 30, 20, cv=0.005)
    small = relative_verdict(base, _noisy(rng, 30, 20.6, cv=0.005))  # +3%: the interval excludes zero
    assert small.low_pct > 0 and small.verdict == "no change" and "5% margin" in small.sentence
    assert relative_verdict(base, _noisy(rng, 30, 20.6, cv=0.005), min_change=0.0).verdict == "slower"
    big = relative_verdict(base, _noisy(rng, 30, 22, cv=0.005))  # +10%
    assert big.verdict == "slower" and 9 < big.change_pct < 11
    assert relative_verdict(base, _noisy(rng, 30, 18.8, cv=0.005)).verdict == "faster"  # -6%


def test_three_steps_per_side_is_inconclusive_even_when_twice_as_slow():
    v = relative_verdict([20e6, 21e6, 19e6], [40e6, 42e6, 41e6])
    assert v.verdict == "inconclusive" and v.low_pct is None
    assert "3 vs 3 steps" in v.sentence and f"at least {MIN_STEPS}" in v.sentence
    # Statistically too: a perfect separation of 3 vs 3 has chance 1/10 under "no change".
    assert shift([1, 2, 3], [4, 5, 6]).low is None


def test_shift_interval_matches_the_exact_mann_whitney_table():
    # 8 vs 8 at 95%: critical U = 13, so the interval runs from the 14th smallest
    # to the 14th largest of the 64 differences new - base.
    base, new = np.arange(8.0), np.arange(8.0) + 100
    s = shift(base, new)
    diffs = np.sort((new[None, :] - base[:, None]).ravel())
    assert s.estimate == 100 and (s.low, s.high) == (diffs[13], diffs[-14])


def test_noisy_steps_do_not_hide_a_99pct_data_loading_drop():
    # BASE: 10 ms loading + 20 ms compute. NEW: 0.1 ms loading, but 3 of 12 steps
    # hit by a busy host (100 ms): the mean is 25% worse, the steps are mostly 33% faster.
    base = [30e6 + k * 1e5 for k in range(12)]
    new = [20.1e6 + k * 1e5 for k in range(9)] + [100e6, 110e6, 90e6]
    assert np.mean(new) > 1.25 * np.mean(base)
    v = relative_verdict(base, new)
    assert v.verdict == "faster" and v.high_pct < 0


# -- compare() over parsed inline traces ----------------------------------------------------------

def _trace(path: Path, steps: list[tuple[float, float]], batch: int = 64, **top) -> Path:
    """One ProfilerStep per (data loading us, forward us): a DataLoader span, then a forward annotation."""
    events, t = [], 1_000.0
    for i, (load, fwd) in enumerate(steps):
        events += [
            X(f"ProfilerStep#{i + 1}", t, load + fwd + 2, cat="user_annotation"),
            X("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", t + 1, load, cat="user_annotation"),
            X("## forward ##", t + 1 + load, fwd, cat="user_annotation"),
            X("aten::linear", t + 1.5 + load, fwd - 1, **{"Input Dims": [[batch, 64], [256, 64]]}),
        ]
        t += load + fwd + 10
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"schemaVersion": 1, "baseTimeNanoseconds": BASE_NS, **top, "traceEvents": events}))
    return path


def _parsed(path: Path) -> TableStore:
    return TableStore(parse_path(path, ParseOptions(output_dir=path.parent / f"{path.stem}_out"))[0].tables_dir)


def _loading_fix(tmp_path: Path) -> tuple[Path, Path]:
    """BASE loads for 10 ms a step; NEW for 0.1 ms (-99%), but 3 of its 12 steps are slow (a busy host)."""
    base = [(10 * MS + 37 * k, 20 * MS + 11 * k) for k in range(12)]
    new = [(0.1 * MS, 20 * MS + 13 * k) for k in range(9)] + [(0.1 * MS, 85 * MS), (0.1 * MS, 90 * MS),
                                                               (0.1 * MS, 105 * MS)]
    return (_trace(tmp_path / "base" / "base.pt.trace.json", base),
            _trace(tmp_path / "new" / "new.pt.trace.json", new))


def test_compare_data_loading_fix_with_noisy_steps_is_faster(tmp_path):
    b, n = _loading_fix(tmp_path)
    with _parsed(b) as bs, _parsed(n) as ns:
        c = compare(bs, ns)
    st = c.step_time
    assert st.new_ns > 1.25 * st.base_ns  # the mean alone says 25%+ slower ...
    assert c.slower_than(5)
    assert c.verdict.verdict == "faster" and c.verdict.high_pct < 0  # ... the steps say faster
    assert st.base_stats.count == st.new_stats.count == 12 and st.new_stats.median_ns < st.base_stats.median_ns
    gate = c.gate(5)
    assert not gate.failed and not gate.inconclusive
    loading = next(d for d in c.breakdown if d.name == "data_loading")
    assert loading.delta_pct == pytest.approx(-99, abs=0.5)
    assert loading.change.high < 0 and loading.new_stats.max_ns == pytest.approx(0.1e6)
    assert c.warnings == []


def test_compare_gate_fails_a_real_slowdown_and_not_one_within_noise(tmp_path):
    rng = np.random.default_rng(3)
    base = [(1 * MS, f) for f in rng.normal(20 * MS, 1 * MS, 12)]
    slow = [(1 * MS, f) for f in rng.normal(30 * MS, 1 * MS, 12)]
    slight = [(1 * MS, f) for f in rng.normal(21.5 * MS, 4 * MS, 12)]
    with _parsed(_trace(tmp_path / "b" / "b.json", base)) as bs, \
            _parsed(_trace(tmp_path / "s" / "s.json", slow)) as ss, \
            _parsed(_trace(tmp_path / "t" / "t.json", slight)) as ts:
        real, noisy = compare(bs, ss), compare(bs, ts)
    assert real.verdict.verdict == "slower" and real.gate(5).failed
    assert "beyond the 5% limit" in real.gate(5).reason
    g = noisy.gate(5)
    assert not g.failed and noisy.verdict.low_pct <= 5


def test_compare_warns_when_gpus_world_size_or_batch_differ(tmp_path):
    steps = [(1 * MS, 20 * MS)] * 6
    b = _trace(tmp_path / "b" / "b.json", steps, deviceProperties=[{"id": 0, "name": "NVIDIA A100-SXM4-80GB"}],
               distributedInfo={"backend": "nccl", "rank": 0, "world_size": 8})
    n = _trace(tmp_path / "n" / "n.json", steps, batch=32, deviceProperties=[{"id": 0, "name": "NVIDIA H100"}],
               distributedInfo={"backend": "nccl", "rank": 0, "world_size": 4})
    with _parsed(b) as bs, _parsed(n) as ns:
        c = compare(bs, ns)
    text = "\n".join(c.warnings)
    assert "GPUs: base NVIDIA A100-SXM4-80GB x1, new NVIDIA H100 x1" in text
    assert "world size: base 8, new 4" in text
    assert "batch shape" in text and "[[64, 64]" in text and "[[32, 64]" in text
    assert c.verdict.verdict == "no change"
    res = _cli(b, n)
    assert res.returncode == 0 and "warning: runs differ in world size: base 8, new 4" in res.stdout


def test_capture_facts_warn_on_level_versions_and_threads():
    def meta(level, torch, omp, cpus):
        return {"capture.config": {"record_shapes": True, "experimental_config": {"profiler_level": level}},
                "capture.versions": {"torch": torch}, "capture.world_size": 1, "capture.host": "vm",
                "profiler_metadata.environment": {"OMP_NUM_THREADS": omp},
                "profiler_metadata.system": {"cpu_count": cpus, "torch_num_threads": int(omp)}}
    same = facts_from_metadata(meta("Level0", "2.5.0+cu124", "4", 16))
    assert fact_warnings(same, same) == []
    other = facts_from_metadata(meta("Level1", "2.6.0+cu126", "8", 32))
    got = fact_warnings(same, other)
    model = {"profiler_metadata.system": {"cpu_model": "AMD EPYC 7763"}}
    assert fact_warnings(facts_from_metadata(model), facts_from_metadata({"profiler_metadata.system": {
        "cpu_model": "Intel Xeon 8480"}})) == ["runs differ in CPU model: base AMD EPYC 7763, new Intel Xeon 8480"]
    assert [w.split(":")[0] for w in got] == ["runs differ in CPU count", "runs differ in torch version",
                                             "runs differ in profiler level", "runs differ in thread settings"]
    assert "base OMP_NUM_THREADS=4, torch threads=4, new OMP_NUM_THREADS=8, torch threads=8" in got[-1]


def test_top_counts_what_it_leaves_out(tmp_path):
    with _parsed(_trace(tmp_path / "b" / "b.json", [(1 * MS, 20 * MS)] * 5)) as bs, \
            _parsed(_trace(tmp_path / "n" / "n.json", [(1 * MS, 25 * MS)] * 5)) as ns:
        every, cut = compare(bs, ns), compare(bs, ns, top=1)
    assert len(every.breakdown) > 1 and every.more["breakdown"] == 0
    assert len(cut.breakdown) == 1 and cut.more["breakdown"] == len(every.breakdown) - 1
    assert cut.to_dict()["more"]["breakdown"] == len(every.breakdown) - 1


# -- the CLI as a subprocess ------------------------------------------------------------------------

def _cli(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mlprof", "compare", *map(str, args)],
                          capture_output=True, text=True, timeout=180)


def test_cli_does_not_fail_the_loading_fix_and_says_why(tmp_path):
    b, n = _loading_fix(tmp_path)
    res = _cli(b, n, "--fail-if-slower", "5", "--top", "2")
    assert res.returncode == 0, res.stderr
    assert "NEW is " in res.stdout and "faster (95% CI" in res.stdout
    assert "more (--top N" in res.stdout and "0 -> 0" not in res.stdout
    assert "not slower by more than 5%" in res.stderr
    # One unit per table: the breakdown shows ms only.
    table = res.stdout.split("Step breakdown (mean per step, ms)")[1].split("\n\n")[0]
    assert " ns" not in table and " us" not in table
    data = json.loads(_cli(b, n, "--json", "--fail-if-slower", "5").stdout)
    assert data["verdict"]["verdict"] == "faster" and data["failed"] is False
    assert data["more"] == {k: 0 for k in data["more"]}  # --json keeps every row
    assert data["step_time"]["base_stats"]["count"] == 12 and data["gate"]["inconclusive"] is False


def test_cli_fails_a_real_slowdown_and_is_explicit_with_too_few_steps(tmp_path):
    base = _trace(tmp_path / "b" / "b.json", [(1 * MS, 20 * MS + 50 * k) for k in range(8)])
    slow = _trace(tmp_path / "s" / "s.json", [(1 * MS, 40 * MS + 50 * k) for k in range(8)])
    res = _cli(base, slow, "--fail-if-slower", "5")
    assert res.returncode == EXIT_SLOWER and "beyond the 5% limit" in res.stderr
    few_b = _trace(tmp_path / "fb" / "fb.json", [(1 * MS, 20 * MS)] * 3)
    few_n = _trace(tmp_path / "fn" / "fn.json", [(1 * MS, 40 * MS)] * 3)
    # A CI gate left on does not fail the build when the runs cannot tell: a warning, exit 0 ...
    res = _cli(few_b, few_n, "--fail-if-slower", "5", "--json")
    assert res.returncode == 0, res.stderr
    assert "warning:" in res.stderr and "cannot tell" in res.stderr and "3 vs 3 steps" in res.stderr
    assert "--strict" in res.stderr and "Traceback" not in res.stderr
    data = json.loads(res.stdout)
    assert data["verdict"]["verdict"] == "inconclusive" and data["gate"]["inconclusive"] is True
    assert data["failed"] is False
    # ... and --strict makes it fail, for those who want a verdict or nothing.
    res = _cli(few_b, few_n, "--fail-if-slower", "5", "--strict", "--json")
    assert res.returncode == EXIT_INCONCLUSIVE, res.stderr
    assert "cannot tell" in res.stderr and json.loads(res.stdout)["failed"] is True
    res = _cli(few_b, few_n, "--strict")
    assert res.returncode == 2 and "--strict: goes with --fail-if-slower" in res.stderr


def test_long_runs_are_thinned_not_exhausting_memory():
    rng = np.random.default_rng(4)
    base, new = _noisy(rng, 5_000, 20), _noisy(rng, 4_000, 22)
    s = shift(base, new, log=True)
    assert s.base_count * s.new_count <= 1_000_000 and s.base_count > 1_000
    assert 0.08 < s.low < s.estimate < s.high < 0.12
    v = relative_verdict(base, new)
    assert v.verdict == "slower" and "5000 vs 4000 steps" in v.sentence


def test_a_busier_machine_is_not_blamed_on_the_code():
    from mlprof.analysis.compare_load import RunLoad, load_aware_verdict

    rng = np.random.default_rng(5)
    work = _noisy(rng, 20, 10, cv=0.02)  # the same CPU work per step in both runs
    base_wall = work
    new_wall = work * 2.0  # NEW ran while other jobs took half the core
    wall = relative_verdict(base_wall, new_wall)
    assert wall.verdict == "slower"
    base = RunLoad(20, 98.0, [int(w * 0.98) for w in base_wall])
    new = RunLoad(20, 49.0, [int(w * 0.49) for w in new_wall])
    verdict, warnings = load_aware_verdict(wall, base, new)
    assert verdict.verdict == "no change" and "CPU time per step" in verdict.sentence
    assert len(warnings) == 1 and "98% of a core during BASE" in warnings[0] and "49% during NEW" in warnings[0]
    # The same loads: wall time stands, no warning.
    same, none = load_aware_verdict(wall, base, RunLoad(20, 95.0, base.cpu_ns_by_step))
    assert same is wall and none == []
    # Twice the work under a busier machine is still slower, on CPU time too.
    more = RunLoad(20, 49.0, [int(w * 2 * 0.98) for w in work])
    assert load_aware_verdict(wall, base, more)[0].verdict == "slower"


def test_on_a_busy_machine_both_runs_are_judged_on_cpu_time():
    from mlprof.analysis.compare_load import RunLoad, load_aware_verdict

    rng = np.random.default_rng(6)
    work = _noisy(rng, 20, 10, cv=0.01)
    # Both runs got about half of the one core their thread could use, NEW a bit less: wall time +8%.
    base_wall, new_wall = work / 0.52, work / 0.48
    wall = relative_verdict(base_wall, new_wall)
    assert wall.verdict == "slower"
    base = RunLoad(20, 52.0, [int(w * 0.52) for w in base_wall], demand_percent=100.0)
    new = RunLoad(20, 48.0, [int(w * 0.48) for w in new_wall], demand_percent=100.0)
    assert base.starved and new.starved
    verdict, warnings = load_aware_verdict(wall, base, new)
    assert verdict.verdict == "no change" and "the machine was busy" in verdict.sentence
    assert "52% (BASE) and 48% (NEW)" in warnings[0]
