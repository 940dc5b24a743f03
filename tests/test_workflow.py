"""The path-taking surface (mlprof.workflow: what ``mlprof.advise(path)`` and friends are), importable without
torch."""

from __future__ import annotations

import subprocess
import sys

import mlprof
from mlprof import workflow


def test_public_names_are_pinned():
    assert sorted(workflow.__all__) == sorted(["advise", "op_analyse", "compare", "cluster", "Thresholds", "Finding",
                                               "AdvisorReport", "Comparison", "ClusterReport"])
    for name in workflow.__all__:
        assert getattr(workflow, name).__doc__, f"{name} has no docstring"
        assert getattr(mlprof, name) is getattr(workflow, name)


def test_analysis_never_imports_torch():
    code = ("import sys, mlprof.workflow, mlprof.cluster_workflow, mlprof.cli.advise, mlprof.cli.op, "
            "mlprof.cli.compare, mlprof.cli.cluster; sys.exit('torch' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", code], timeout=60).returncode == 0
