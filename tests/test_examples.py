"""The bundled examples train for real and leave a profiled capture."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@pytest.mark.parametrize(
    "script,expected_op",
    [("cnn_train.py", "aten::conv2d"),  # the README's example
     pytest.param("transformer_lm.py", "aten::embedding", marks=pytest.mark.long)],
)
def test_example_trains_and_writes_a_capture(tmp_path, script, expected_op):
    result = subprocess.run(
        [sys.executable, str(EXAMPLES / script), "--steps", "16", "--out", str(tmp_path), "--no-analyse"],
        capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    losses = [float(line.split()[-1]) for line in result.stdout.splitlines() if line.startswith("step")]
    assert len(losses) == 4 and losses[-1] < losses[0], result.stdout
    (capture,) = tmp_path.glob("*_mlprof")
    assert f"capture: {capture}" in result.stdout
    window = capture / "raw" / "window_0000"
    assert [s["step"] for s in json.loads((window / "steps.json").read_text())] == [3, 4, 5, 6]
    trace = json.loads((window / "kineto.pt.trace.json").read_text())
    assert any(e.get("name") == expected_op for e in trace["traceEvents"])
    ranges = json.loads((window / "markers.json").read_text())["ranges"]
    assert [r["name"] for r in ranges] == [f"train step {i}" for i in (3, 4, 5, 6)]
