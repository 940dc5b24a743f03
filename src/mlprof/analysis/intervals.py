"""Lengths of unions of time intervals (numpy; no per-interval Python work)."""

from __future__ import annotations

import numpy as np

__all__ = ["union_length"]


def union_length(start: np.ndarray, end: np.ndarray) -> int:
    """Total time covered by at least one interval [start, end)."""
    if len(start) == 0:
        return 0
    order = np.argsort(start, kind="stable")
    s = start[order]
    e = np.maximum.accumulate(end[order])
    # A new run starts where an interval begins after everything before it ended.
    new_run = np.empty(len(s), dtype=bool)
    new_run[0] = True
    new_run[1:] = s[1:] > e[:-1]
    run_id = np.cumsum(new_run) - 1
    run_start = s[new_run]
    run_end = np.zeros(run_id[-1] + 1, dtype=np.int64)
    np.maximum.at(run_end, run_id, e)
    return int((run_end - run_start).sum())
