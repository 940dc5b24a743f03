"""benchmarks/ui_timeline.py still runs end to end (small size; its timings are not judged here)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_ui_timeline_benchmark_runs_on_a_small_capture(tmp_path):
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "ui_timeline.py"), "--events", "20000",
                        "--zooms", "5", "--workdir", str(tmp_path), "--chromium", str(tmp_path / "no-browser")],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "slices in the timeline index: " in r.stdout
    assert "first view (meta + whole-run window, index built cold): " in r.stdout
    assert "zoom/pan answers (5): " in r.stdout
    assert "in the browser: skipped" in r.stdout
    assert (tmp_path / "big_mlprof_output" / "tables" / "host_ops.parquet").is_file()
