"""No module of mlprof over 600 lines (issue 35): a module that long holds more than one job; split it first."""

from __future__ import annotations

from pathlib import Path

import mlprof

MAX_LINES = 600


def test_no_module_is_over_600_lines():
    src = Path(mlprof.__file__).parent
    long = {f.relative_to(src).as_posix(): n for f in sorted(src.rglob("*.py"))
            if (n := len(f.read_text().splitlines())) > MAX_LINES}
    assert long == {}
