"""Kept for callers of the old place: the path-taking functions live in :mod:`mlprof.workflow`."""

from __future__ import annotations

from mlprof.workflow import (AdvisorReport, ClusterReport, Comparison, Finding, Thresholds, advise, cluster, compare,
                             op_analyse)

__all__ = ["advise", "op_analyse", "compare", "cluster", "Thresholds", "Finding", "AdvisorReport", "Comparison",
           "ClusterReport"]
