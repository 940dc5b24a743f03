"""Analyses: pure functions over the parsed tables, returning rows or typed results."""

from mlprof.analysis.ops import api_statistic, kernel_statistic, op_statistic, operator_details
from mlprof.analysis.steps import StepBreakdown, step_breakdown

__all__ = ["StepBreakdown", "step_breakdown", "op_statistic", "operator_details",
           "kernel_statistic", "api_statistic"]
