"""The cluster report in views that stay small at any number of ranks (the cluster page's charts).

A job of 1,024 ranks must not draw 1,024 bars or heatmap rows: ranks are
grouped into at most ``MAX_BANDS`` bands of consecutive ranks, each band's cell
the largest value among its ranks (a straggler stays visible), and per-rank
charts keep the ``TOP_RANKS`` ranks that matter most. Pure functions of
``ClusterReport.to_dict()``; the full rows stay in the report (its downloads).
"""

from __future__ import annotations

import statistics

__all__ = ["MAX_BANDS", "TOP_RANKS", "rank_bands", "arrival_by_rank", "lateness_map", "step_spread",
           "matrix_view", "cluster_views"]

MAX_BANDS = 64
TOP_RANKS = 20


def rank_bands(ranks: list[int], max_bands: int = MAX_BANDS) -> list[tuple[int, int, str]]:
    """Consecutive ranks (sorted) in at most ``max_bands`` bands of equal size: ``(first, last, label)``."""
    ranks = sorted(set(ranks))
    size = max(1, -(-len(ranks) // max(1, max_bands)))
    out = []
    for i in range(0, len(ranks), size):
        chunk = ranks[i:i + size]
        out.append((chunk[0], chunk[-1], f"rank {chunk[0]}" if len(chunk) == 1 else f"ranks {chunk[0]}-{chunk[-1]}"))
    return out


def _band_of(bands: list[tuple[int, int, str]]):
    firsts = [b[0] for b in bands]

    def index(rank: int) -> int:
        lo, hi = 0, len(firsts) - 1
        while lo < hi:  # the last band whose first rank is <= rank
            mid = (lo + hi + 1) // 2
            if firsts[mid] <= rank:
                lo = mid
            else:
                hi = mid - 1
        return lo
    return index


def arrival_by_rank(arrivals: list[dict]) -> list[dict]:
    """Per rank, over every collective: instances, how often it arrived last, its share, and its mean lateness
    behind the first rank (weighted by instances); the latest arrivers first."""
    acc: dict[int, dict] = {}
    for a in arrivals:
        r = acc.setdefault(a["rank"], {"rank": a["rank"], "source": a.get("source"), "instances": 0, "last_count": 0,
                                       "late_ns": 0})
        r["instances"] += a["instances"]
        r["last_count"] += a["last_count"]
        r["late_ns"] += a["mean_late_ns"] * a["instances"]
    out = []
    for r in acc.values():
        n = r.pop("instances")
        late = r.pop("late_ns")
        out.append({**r, "instances": n, "last_share": round(r["last_count"] / n, 4) if n else None,
                    "mean_late_ns": round(late / n) if n else None})
    out.sort(key=lambda r: (-(r["last_share"] or 0), -(r["mean_late_ns"] or 0), r["rank"]))
    return out


def lateness_map(skew_rows: list[dict], max_bands: int = MAX_BANDS) -> dict:
    """Steps x rank bands: per step the collectives' lateness of the band's latest rank (ns), as heatmap cells
    ``[step index, band index, ns]``."""
    rows = [r for r in skew_rows if r.get("step") is not None and r.get("rank") is not None]
    steps = sorted({r["step"] for r in rows})
    bands = rank_bands([r["rank"] for r in rows], max_bands)
    band = _band_of(bands)
    x = {s: i for i, s in enumerate(steps)}
    cells: dict[tuple[int, int], int] = {}
    for r in rows:
        key = (x[r["step"]], band(r["rank"]))
        cells[key] = max(cells.get(key, 0), r.get("late_ns") or 0)
    return {"steps": steps, "bands": [label for *_, label in bands],
            "ranks_per_band": max((b[1] - b[0] + 1 for b in bands), default=1),
            "cells": [[i, j, v] for (i, j), v in sorted(cells.items())]}


def step_spread(step_rows: list[dict]) -> list[dict]:
    """Per step across ranks: ranks, fastest, median and slowest step time, and the slowest rank."""
    by_step: dict[int, list[tuple[int, int]]] = {}
    for r in step_rows:
        if r.get("step") is not None and r.get("dur_ns") is not None:
            by_step.setdefault(r["step"], []).append((r["dur_ns"], r["rank"]))
    out = []
    for step, vals in sorted(by_step.items()):
        durs = sorted(d for d, _ in vals)
        slow_ns, slow_rank = max(vals)
        out.append({"step": step, "ranks": len(vals), "min_ns": durs[0], "median_ns": round(statistics.median(durs)),
                    "max_ns": slow_ns, "slowest_rank": slow_rank})
    return out


def matrix_view(matrix: list[dict], max_bands: int = MAX_BANDS) -> dict:
    """Source x destination bands of the communication matrix (bytes where every cell knows them, else time):
    ``{labels, cells: [[dst index, src index, value]], value: "size_bytes"|"time_ns"}``."""
    value = "size_bytes" if matrix and any(m.get("size_bytes") for m in matrix) else "time_ns"
    ranks = [m["src_rank"] for m in matrix] + [m["dst_rank"] for m in matrix]
    bands = rank_bands(ranks, max_bands)
    band = _band_of(bands)
    cells: dict[tuple[int, int], int] = {}
    for m in matrix:
        key = (band(m["dst_rank"]), band(m["src_rank"]))
        cells[key] = cells.get(key, 0) + (m.get(value) or 0)
    return {"labels": [label for *_, label in bands], "value": value,
            "cells": [[x, y, v] for (x, y), v in sorted(cells.items()) if v]}


def cluster_views(report: dict, max_bands: int = MAX_BANDS, top: int = TOP_RANKS) -> dict:
    """Every view of the cluster page; ``slowest_ranks``: the ``top`` ranks (all when few) by mean step time less
    the wait for other ranks (in a synchronous job every rank's step lasts as long as the slowest one's: the
    slow rank is the one that waits least)."""
    ranks = sorted(report.get("ranks", []), key=lambda r: -((r.get("step_ns") or 0) - (r.get("wait_ns") or 0)))
    return {"ranks": len(ranks), "max_bands": max_bands,
            "slowest_ranks": sorted(ranks[:top], key=lambda r: r["rank"]) if len(ranks) > top else
            sorted(ranks, key=lambda r: r["rank"]),
            "arrival_by_rank": arrival_by_rank(report.get("arrivals", [])),
            "lateness": lateness_map(report.get("skew_rows", []), max_bands),
            "step_spread": step_spread(report.get("step_rows", [])),
            "matrix": matrix_view(report.get("matrix", []), max_bands)}
