"""benchmarks/compare_verdicts.py --regroup: saved runs judged again, one or several per side, at another margin."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

BENCHMARK = Path(__file__).resolve().parents[2] / "benchmarks" / "compare_verdicts.py"
MS = 1_000_000


def _run(extra_pct: float, offset: float, seed: int) -> dict:
    """A saved run: 24 steps of 50 ms (times 1 + extra) at a host speed ``offset`` away from nominal, with the
    probe following the host's speed, as compare's one-host-speed measure expects."""
    rng = random.Random(seed)
    wall = [round(50 * MS * (1 + extra_pct / 100) * (1 + offset) * (1 + rng.gauss(0, 0.01))) for _ in range(24)]
    probe = [round(2 * MS * (1 + offset) * (1 + rng.gauss(0, 0.005))) for _ in range(24)]
    return {"wall_ns": wall, "wait_ns": [0] * 24, "thread_cpu_ns": wall, "process_cpu_ns": wall,
            "speed_probe_ns": probe}


def _regroup(saved: list[dict], tmp_path: Path, *args: str) -> str:
    path = tmp_path / "runs.json"
    path.write_text(json.dumps(saved))
    done = subprocess.run([sys.executable, str(BENCHMARK), "--regroup", str(path), *args],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_one_run_per_side_at_compares_margin_and_at_another(tmp_path):
    # Same-code runs whose host speed differs (the probe follows it), and runs with 15% and 100% more work.
    saved = [{"condition": "quiet", "run": f"{i} chain", "extra_pct": 0, **_run(0, 0.3 * (i % 2), i)}
             for i in range(6)]
    saved += [{"condition": "quiet", "run": f"{i} +15%", "extra_pct": 15, **_run(15, 0.0, 100 + i)} for i in range(5)]
    saved += [{"condition": "quiet", "run": f"{i} +100%", "extra_pct": 100, **_run(100, 0.0, 200 + i)}
              for i in range(5)]
    out = _regroup(saved, tmp_path, "--per-side", "1")
    row = next(line for line in out.splitlines() if line.startswith("| quiet"))
    # 30% faster or slower hosts are divided out: no A/A pair slower; 2x always, 15% under the 20% margin.
    assert row == "| quiet | 0/5 | 0/5 | 0/5 (0/5) | 5/5 (5/5) |", out
    assert "verdicts on: step time at one host speed" in out
    out = _regroup(saved, tmp_path, "--per-side", "1", "--margin", "10")
    row = next(line for line in out.splitlines() if line.startswith("| quiet"))
    assert "margin 10%" in out and row == "| quiet | 0/5 | 0/5 | 5/5 (5/5) | 5/5 (5/5) |", out


def test_three_runs_per_side(tmp_path):
    saved = [{"condition": "busy", "run": f"{i} chain", "extra_pct": 0, **_run(0, 0.02 * (i % 3), i)}
             for i in range(8)]
    saved += [{"condition": "busy", "run": f"{i} +100%", "extra_pct": 100, **_run(100, 0.0, 50 + i)} for i in range(3)]
    out = _regroup(saved, tmp_path, "--per-side", "3")
    row = next(line for line in out.splitlines() if line.startswith("| busy"))
    assert row == "| busy | 0/3 | 0/3 | 1/1 (1/1) |", out
