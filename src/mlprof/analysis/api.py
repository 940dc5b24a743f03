"""The path-taking analysis functions, under the names ``mlprof`` exports at top level.

Each accepts what a user has at hand (a capture directory, a directory of
captures, a trace file or a parsed output directory) and parses on demand;
the store-taking functions they wrap live in their own modules.

    import mlprof
    mlprof.op_analyse("result/host_..._mlprof", ["aten::conv2d"])
    for report in mlprof.advise("result"): ...
    mlprof.compare("runs/before", "runs/after").speedup
    mlprof.cluster("result", workers=4).slow_ranks
"""

from __future__ import annotations

from mlprof.analysis.advisor import AdvisorReport, Finding, Thresholds
from mlprof.analysis.advisor import advise_path as advise
from mlprof.analysis.cluster import ClusterReport, cluster
from mlprof.analysis.compare import Comparison
from mlprof.analysis.compare import compare_paths as compare
from mlprof.analysis.op_analyse import op_analyse

__all__ = ["advise", "op_analyse", "compare", "cluster", "Thresholds", "Finding", "AdvisorReport", "Comparison",
           "ClusterReport"]
