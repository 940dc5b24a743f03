"""The README's loop, as written: collect twice with `mlprof run`'s defaults, then `compare --fail-if-slower`.

The commands are read from the README (the block after "The loop on the bundled example"), so the
README is what is tested. Default captures must decide: the gate answers pass or fail, never "cannot
tell". Whether it passes the same code is a timing judgement, measured by
benchmarks/compare_verdicts.py, so this test accepts exit 0 or 9 but not a missing verdict.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytest.importorskip("torch")


def readme_loop() -> list[list[str]]:
    text = (ROOT / "README.md").read_text()
    block = text.split("The loop on the bundled example")[1].split("```sh")[1].split("```")[0]
    commands = []
    for line in block.strip().splitlines():
        line = re.sub(r"\s+#.*$", "", line).strip()
        commands.append(shlex.split(line))
    return commands


def test_the_readme_loop_works_as_written_with_defaults(tmp_path):
    commands = readme_loop()
    assert [c[:2] for c in commands] == [["mlprof", "run"], ["mlprof", "run"], ["mlprof", "compare"]]
    env = {**os.environ, "MLPROF_LOCK_DIR": str(tmp_path / "locks")}
    for command in commands:
        # `mlprof` and `python` are this interpreter's; paths are the README's, relative to the repository.
        argv = [sys.executable, "-m", "mlprof", *command[1:]]
        argv = [sys.executable if a == "python" else str(ROOT / a) if a.startswith("examples/") else
                str(tmp_path / a) if a.startswith("./") else a for a in argv]
        if command[1] == "compare":
            argv.append("--json")
        done = subprocess.run(argv, capture_output=True, text=True, timeout=600, env=env, cwd=tmp_path)
        if command[1] == "run":
            assert done.returncode == 0, done.stderr[-2000:]
            continue
        assert done.returncode in (0, 9), done.stderr[-2000:]
        data = json.loads(done.stdout)
        assert data["gate"]["inconclusive"] is False, data["gate"]["reason"]
        assert data["verdict"]["verdict"] in ("no change", "slower", "faster")
        assert data["verdict"]["base_steps"] >= 20 and data["verdict"]["new_steps"] >= 20
