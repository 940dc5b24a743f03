"""The public analysis surface: path-taking functions, importable without torch."""

from __future__ import annotations

import subprocess
import sys

from mlprof.analysis import api


def test_public_names_are_pinned():
    assert sorted(api.__all__) == sorted(["advise", "op_analyse", "compare", "cluster", "Thresholds", "Finding",
                                          "AdvisorReport", "Comparison", "ClusterReport"])
    for name in api.__all__:
        assert getattr(api, name).__doc__, f"{name} has no docstring"


def test_analysis_never_imports_torch():
    code = ("import sys, mlprof.analysis.api, mlprof.cli.advise, mlprof.cli.op, mlprof.cli.compare, "
            "mlprof.cli.cluster; sys.exit('torch' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", code], timeout=60).returncode == 0
