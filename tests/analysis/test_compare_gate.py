"""`mlprof compare --fail-if-slower`: each path of the decision on hand-built runs, and several runs per side.

No test here measures a real run: what the gate does on real runs, quiet and busy, is measured by
benchmarks/compare_verdicts.py (docs/analysis.md), not asserted in CI.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from mlprof.analysis.compare import compare
from mlprof.analysis.compare_runs import MIN_RUNS, runs_verdict, t_quantile
from mlprof.cli.exit_codes import EXIT_SLOWER
from test_compare_stats import MS, _parsed, _trace


def _cli(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mlprof", "compare", *map(str, args)],
                          capture_output=True, text=True, timeout=180)


def _steps(fwd_ms: float, n: int = 12, jitter_us: int = 40) -> list[tuple[float, float]]:
    # Steady steps around fwd_ms, a little spread: the per-step interval is narrow.
    return [(1 * MS, fwd_ms * MS + jitter_us * ((k * 7) % 5)) for k in range(n)]


def test_t_quantiles_match_the_tables():
    # Student's t, 97.5th percentile (any statistics table).
    for df, expected in ((1, 12.706), (2, 4.303), (4, 2.776), (9, 2.262), (30, 2.042)):
        assert math.isclose(t_quantile(0.975, df), expected, abs_tol=1e-3)
    assert math.isclose(t_quantile(0.5, 3), 0.0, abs_tol=1e-6)


def test_runs_verdict_reads_the_spread_between_runs():
    same = runs_verdict([[100.0] * 6, [108.0] * 6, [95.0] * 6], [[103.0] * 6, [97.0] * 6, [106.0] * 6])
    assert same.verdict == "no change" and same.low_pct < 0 < same.high_pct
    assert same.base_runs == 3 and same.new_runs == 3 and "3 vs 3 runs" in same.sentence
    slower = runs_verdict([[100.0] * 6, [104.0] * 6, [98.0] * 6], [[130.0] * 6, [127.0] * 6, [133.0] * 6])
    assert slower.verdict == "slower" and 20 < slower.low_pct < slower.change_pct < slower.high_pct
    # One run a side has no spread to read; a run of 3 steps is too short.
    assert runs_verdict([[100.0] * 6], [[130.0] * 6]).verdict == "inconclusive"
    assert MIN_RUNS == 3
    assert runs_verdict([[100.0] * 6, [100.0] * 3], [[130.0] * 6]).verdict == "inconclusive"


def test_a_change_under_the_margin_of_one_run_per_side_does_not_fail_the_gate(tmp_path):
    # +10%, steady steps: the per-step interval excludes 0, but one run per side cannot tell +10% of code
    # from the offset between two runs of the same code on a CPU host (the 20% margin).
    with _parsed(_trace(tmp_path / "b" / "b.json", _steps(20))) as b, \
            _parsed(_trace(tmp_path / "n" / "n.json", _steps(22))) as n:
        result = compare(b, n)
    v = result.verdict
    assert v.verdict == "no change" and v.low_pct > 5 and v.margin_pct == 20
    gate = result.gate(5)
    assert not gate.failed and not gate.inconclusive
    assert "under the 20% by which runs of the same code differ" in gate.reason
    assert "several runs per side" in gate.reason and gate.measure == "wall time"


def test_slower_but_within_noise_of_the_limit_passes(tmp_path):
    # +40% with a wide spread: slower, but not surely by more than a 35% limit.
    with _parsed(_trace(tmp_path / "b" / "b.json", _steps(20, jitter_us=2000))) as b, \
            _parsed(_trace(tmp_path / "n" / "n.json", _steps(30, jitter_us=2000))) as n:
        result = compare(b, n)
    assert result.verdict.verdict == "slower"
    gate = result.gate(35)
    assert not gate.failed and "within noise of the 35% limit" in gate.reason
    assert result.gate(5).failed


def _runs(directory: Path, fwd_ms: list[float]) -> Path:
    for i, ms in enumerate(fwd_ms):
        _trace(directory / f"run{i}.pt.trace.json", _steps(ms))
    return directory


def test_several_runs_per_side_from_directories(tmp_path):
    # Three runs of the same code whose offsets differ by up to 16%: one pair alone would be called +16%,
    # the runs' spread says it is noise.
    base = _runs(tmp_path / "base", [20, 23.2, 21])
    same = _runs(tmp_path / "same", [21.5, 20.2, 22.8])
    res = _cli(base, same, "--fail-if-slower", "5", "--json")
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    v = data["verdict"]
    assert v["verdict"] == "no change" and v["base_runs"] == 3 and v["new_runs"] == 3
    assert len(data["base_runs"]) == 3 and "3 vs 3 runs" in v["sentence"]
    assert any("3 base run(s) and 3 new run(s)" in note for note in data["notes"])
    assert data["step_time"]["base_stats"]["count"] == 36  # every step of every run
    # A real slowdown across three runs fails the gate, and the terminal says what decided.
    slow = _runs(tmp_path / "slow", [30, 31.5, 29.5])
    res = _cli(base, slow, "--fail-if-slower", "5")
    assert res.returncode == EXIT_SLOWER, res.stderr
    assert "3 vs 3 runs" in res.stdout and "verdict taken on: wall time" in res.stdout


def test_a_side_with_a_run_without_steps_is_named(tmp_path):
    base = _runs(tmp_path / "base", [20, 21])
    new = _runs(tmp_path / "new", [20])
    empty = tmp_path / "new" / "empty.pt.trace.json"
    empty.write_text(json.dumps({"schemaVersion": 1, "traceEvents": [
        {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 1.0, "dur": 2.0}]}))
    res = _cli(base, new)
    assert res.returncode != 0 and "Traceback" not in res.stderr
    assert "new run" in res.stderr and "no profiled steps" in res.stderr


@pytest.mark.parametrize("flag", ["--strict"])
def test_strict_alone_is_a_usage_error(tmp_path, flag):
    base = _runs(tmp_path / "b", [20])
    res = _cli(base, base, flag)
    assert res.returncode == 2 and "goes with --fail-if-slower" in res.stderr
