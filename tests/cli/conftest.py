"""Helpers for command-line tests: run mlprof as a real subprocess."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

BLOCK_TORCH = "import sys; sys.modules['torch'] = None\n"


def run_cli(*args: str, module: bool = True, block_torch: bool = False, timeout: int = 300):
    """``python -m mlprof ARGS`` (or the ``mlprof`` script) as a subprocess."""
    if block_torch:
        cmd = [sys.executable, "-c", BLOCK_TORCH + "from mlprof.cli.main import main; sys.exit(main())", *args]
    elif module:
        cmd = [sys.executable, "-m", "mlprof", *args]
    else:
        script = shutil.which("mlprof", path=str(Path(sys.executable).parent))
        if script is None:
            pytest.skip("mlprof script not installed (pip install -e .)")
        cmd = [script, *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)

