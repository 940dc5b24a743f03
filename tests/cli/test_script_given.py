"""A training script given where a trace or capture belongs (issue 34): `mlprof advise ./train.py` said
"not a valid Kineto trace: Expected `object`, got `str`"; it says what the file is and how to profile it."""

from __future__ import annotations

import subprocess
import sys

import pytest


@pytest.mark.parametrize("command", ["advise", "parse", "query"])
def test_a_python_script_is_named_and_the_run_line_shown(tmp_path, command):
    script = tmp_path / "train.py"
    # A docstring first: it reads as a JSON string, the message that confused a user.
    script.write_text('"""Train a model."""\nimport torch\n')
    done = subprocess.run([sys.executable, "-m", "mlprof", command, str(script)], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path)
    assert done.returncode == 4
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert f"{script}: a Python script, not a trace or capture" in done.stderr
    assert f"mlprof run --output ./result -- python {script}" in done.stderr


def test_a_trace_with_another_name_keeps_the_trace_error(tmp_path):
    bad = tmp_path / "trace.txt"
    bad.write_text('"""Train a model."""\n')
    done = subprocess.run([sys.executable, "-m", "mlprof", "parse", str(bad)], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 4 and "not a valid Kineto trace" in done.stderr and "Python script" not in done.stderr
