"""What the set-up scripts install (issue 34): the demo what it runs, the tests the rest, every version pinned.

The sizes are measured, not tested (README: the demo's .venv). Here: the demo's set-up installs no test
extras, the test command's does, and constraints.txt pins every dependency either asks for, so a fresh
machine gets the versions the tests ran with.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _name(requirement: str) -> str:
    return re.split(r"[\s<>=!~;\[]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def _pins() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            assert version, f"constraints.txt: {line!r} is not pinned with =="
            pins[name.lower().replace("_", "-")] = version
    return pins


def test_constraints_pin_every_runtime_and_test_dependency_but_torch():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = {_name(r) for r in project["dependencies"] + project["optional-dependencies"]["test"]}
    pins = _pins()
    assert not wanted - set(pins), f"not pinned in constraints.txt: {sorted(wanted - set(pins))}"
    # torch is the setup's own pin (MLPROF_TORCH_VERSION); pinning it here would refuse another build.
    assert "torch" not in pins


def _setup_calls(script: str) -> list[str]:
    return [line.strip() for line in (ROOT / "scripts" / script).read_text().splitlines()
            if line.strip().startswith("bash scripts/setup.sh")]


def test_the_demo_installs_no_test_extras_and_the_tests_do():
    assert _setup_calls("demo.sh") == ["bash scripts/setup.sh"]
    assert _setup_calls("test.sh") == ["bash scripts/setup.sh --test"]
    setup = (ROOT / "scripts" / "setup.sh").read_text()
    assert 'EXTRAS="[test]"' in setup and '-c "$CONSTRAINTS"' in setup and "CONSTRAINTS=${MLPROF_CONSTRAINTS-constraints.txt}" in setup


def test_setup_refuses_an_unknown_option_before_touching_anything(tmp_path):
    done = subprocess.run(["bash", str(ROOT / "scripts" / "setup.sh"), "--tests"], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2 and done.stderr.strip() == "usage: bash scripts/setup.sh [--test]"
