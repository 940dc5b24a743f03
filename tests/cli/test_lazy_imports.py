"""Building the command line loads no command's work: every ``mlprof`` call (and ``--help``) pays only
for its own command. Each command's module imports its analyses, the parser and the writers inside its
``run``; ``mlprof.export`` holds only options and names until ``run_exports`` is asked for."""

from __future__ import annotations

import subprocess
import sys

# Loaded only by the commands that use them.
_HEAVY = ("mlprof.analysis.advisor", "mlprof.analysis.compare", "mlprof.analysis.cluster", "mlprof.workflow",
          "mlprof.parse.pipeline", "mlprof.export.runner", "mlprof.collect.runner")


def _loaded_after(code: str) -> set[str]:
    out = subprocess.run([sys.executable, "-c", f"{code}\nimport sys\nprint('\\n'.join(sys.modules))"],
                         capture_output=True, text=True, check=True).stdout.split()
    return set(out)


def test_building_the_parser_loads_no_command_work():
    loaded = _loaded_after("from mlprof.cli.main import build_parser\nbuild_parser()")
    assert loaded.isdisjoint(_HEAVY), sorted(loaded & set(_HEAVY))


def test_run_exports_is_still_there_when_asked_for():
    loaded = _loaded_after("from mlprof.export import run_exports, trace_view_deferred, ExportOptions")
    assert "mlprof.export.runner" in loaded
