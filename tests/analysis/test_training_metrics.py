"""Training scalars in analyses: per-step metrics next to step time, and throughput in compare (no torch)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from mlprof.analysis.compare import compare
from mlprof.analysis.training import metrics_by_step, throughput_changes
from mlprof.parse import ParseOptions, parse_path
from mlprof.tables.store import TableStore
from trace_events import BASE_NS

STEP_NS = 10_000_000
BLOCK_TORCH = "import sys; sys.modules['torch'] = None\n"


def make_run(root: Path, rate: float, steps: int = 12, profiled=range(5, 11)) -> Path:
    """A Level_none capture of ``profiled`` steps, and a loss and samples/s logged for every step."""
    capture = root / "host_1_20240101000000000_mlprof"
    window = capture / "raw" / "window_0000"
    window.mkdir(parents=True)
    (capture / "profiler_info.json").write_text(json.dumps(
        {"schema_version": 1, "kind": "mlprof.capture", "status": "finished", "rank": 0, "world_size": 1,
         "config": {"experimental_config": {"profiler_level": "Level_none"}}}))
    step_rows = [{"step": s, "start_ns": BASE_NS + s * STEP_NS, "end_ns": BASE_NS + (s + 1) * STEP_NS - 1000}
                 for s in profiled]
    (window / "steps.json").write_text(json.dumps(step_rows))
    (window / "window.json").write_text(json.dumps({"index": 0, "status": "complete", "level": "Level_none",
                                                    "files": {"steps": "steps.json"}}))
    rows = []
    for s in range(1, steps + 1):
        ts = BASE_NS + (s + 1) * STEP_NS
        rows.append(["loss", s, ts, 5.0 - 0.1 * s, "transformers"])
        # A little step-to-step noise, the same pattern in both runs.
        rows.append(["samples_per_second", s, ts + 1, rate * (1 + 0.01 * (s % 3)), "mlprof"])
    (capture / "scalars").mkdir()
    (capture / "scalars" / "segment_0000.json").write_text(json.dumps({"rows": rows[:10], "dropped": 0}))
    (capture / "scalars" / "segment_0001.json").write_text(json.dumps({"rows": rows[10:], "dropped": 0}))
    (result,) = parse_path(capture, ParseOptions())
    return Path(result.output_dir)


@pytest.fixture
def two_runs(tmp_path):
    return make_run(tmp_path / "base", 100.0), make_run(tmp_path / "new", 150.0)


def test_metrics_by_step_puts_loss_and_throughput_next_to_step_time(two_runs):
    with TableStore(two_runs[0] / "tables") as store:
        rows = metrics_by_step(store)
    assert [r["step"] for r in rows] == list(range(1, 13))
    by_step = {r["step"]: r for r in rows}
    assert by_step[1]["dur_ns"] is None and by_step[5]["dur_ns"] == STEP_NS - 1000
    assert by_step[7]["metrics"] == {"loss": pytest.approx(4.3), "samples_per_second": pytest.approx(101.0)}


def test_compare_reports_the_throughput_change(two_runs):
    base, new = two_runs
    with TableStore(base / "tables") as b, TableStore(new / "tables") as n:
        (change,) = throughput_changes(b, n)
        comparison = compare(b, n)
    assert change.name == "samples_per_second" and change.aligned_by == "step number"
    assert change.change_pct == pytest.approx(50.0, abs=2) and change.verdict == "more"
    assert change.low_pct > 0 and change.base_steps == change.new_steps == 12
    assert comparison.throughput == [change]
    assert comparison.to_dict()["throughput"][0]["name"] == "samples_per_second"


def test_the_cli_prints_the_throughput_change_without_torch(two_runs):
    base, new = two_runs
    code = BLOCK_TORCH + "from mlprof.cli.main import main; sys.exit(main())"
    result = subprocess.run([sys.executable, "-c", code, "compare", str(base.parent), str(new.parent)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    head = lines.index("Throughput (median per step, higher is better)")
    assert "samples_per_second (more)" in lines[head + 2] and "+50" in lines[head + 2]
