"""What the run list and the page menu need to know about a run, read once per parse.

The run list shows each run's job, rank, device and step time, and the menu
greys out pages a run has nothing for (no kernels on a CPU run, no memory
without profile_memory, no cluster view for a single rank). Both come from a
few counts over the run's tables, cached per output dir and tables mtime so
the run list's 5 s refresh does not reopen every run.
"""

from __future__ import annotations

import statistics
import threading
from pathlib import Path

from mlprof.analysis.communication import rank_of
from mlprof.analysis.devices import run_device
from mlprof.tables.store import TableStore
from mlprof.tables.layout import TABLES_DIR

__all__ = ["SummaryCache", "run_summary", "features", "PAGE_NEEDS"]

# page -> (count that must be > 0, why the page is empty otherwise)
PAGE_NEEDS = {
    "kernels": ("device_ops", "no device kernels, copies or runtime calls: a CPU-only run"),
    "memory": ("memory_events", "no allocator events: profile with profile_memory=True (mlprof run --profile-memory)"),
    "host": ("counters", "no host or device samples: collect with host_sys (mlprof run samples cpu and mem "
                         "by default)"),
    "modules": ("module_calls", "no nn.Module calls: record_modules is on under mlprof run, or pass "
                                "with_modules=True"),
    "callsites": ("python_samples", "no Python stack samples: python_sampling is on under mlprof run"),
    "step_trace": ("steps", "no steps: the trace has no ProfilerStep spans and no mlprof steps.json"),
    "data_loading": ("steps", "no steps: data loading is measured per step"),
    "whole_job": ("job_steps", "not monitored: mlprof run --monitor times every step of the job and opens "
                               "windows where steps turn slow (docs/monitor.md)"),
}


def run_summary(out_dir: Path) -> dict:
    """Job, rank, device, steps and mean step time of one parsed output, and the counts pages need."""
    with TableStore(out_dir / TABLES_DIR) as store:
        counts = {name: store.rows(f'SELECT count(*) FROM (SELECT 1 FROM "{name}" LIMIT 1)')[0][0]
                  for name in {need for need, _ in PAGE_NEEDS.values()} | {"runtime_calls"}}
        step_rows = store.rows("SELECT step, dur_ns FROM steps ORDER BY start_ns")
        durs = [d for _, d in step_rows]
        device = run_device(store)
        dist = store.meta("distributedInfo")
        world = store.meta("capture.world_size")
        if world is None and isinstance(dist, dict):
            world = dist.get("world_size")
        job = store.meta("capture.worker_name")
        first = store.rows("SELECT min(start_ns) FROM steps")[0][0]
        return {
            "job": str(job) if job else None, "rank": rank_of(store),
            "world_size": world if isinstance(world, int) else None,
            "backend": dist.get("backend") if isinstance(dist, dict) else None,
            "device": device.label, "device_kind": device.kind,
            "steps": len(durs), "mean_step_ns": statistics.fmean(durs) if durs else None,
            "median_step_ns": statistics.median(durs) if durs else None,
            "first_step_ns": str(first) if first is not None else None,
            "step_numbers": [s for s, _ in step_rows],
            "counts": {k: int(bool(v)) for k, v in counts.items()},
        }


class SummaryCache:
    """run_summary per output dir, recomputed when its tables are rewritten."""

    def __init__(self) -> None:
        self._cache: dict[Path, tuple[int, dict]] = {}
        self._lock = threading.Lock()

    def get(self, out_dir: Path) -> dict:
        mtime = (out_dir / TABLES_DIR).stat().st_mtime_ns
        with self._lock:
            hit = self._cache.get(out_dir)
        if hit is not None and hit[0] == mtime:
            return hit[1]
        try:
            summary = run_summary(out_dir)
        except Exception as exc:  # a broken table file: the list still shows the run, with the reason
            summary = {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}",
                       "counts": {}}
        with self._lock:
            self._cache[out_dir] = (mtime, summary)
        return summary


def features(summary: dict, ranks_in_folder: int) -> dict:
    """page -> {available, reason}: what the menu shows and what an empty page says."""
    counts = summary.get("counts", {})
    out = {page: {"available": bool(counts.get(need)), "reason": None if counts.get(need) else why}
           for page, (need, why) in PAGE_NEEDS.items()}
    if counts.get("runtime_calls") and not counts.get("device_ops"):
        out["kernels"] = {"available": True, "reason": None}  # runtime calls without kernels still have a table
    for page in ("overview", "operators", "timeline", "advisor", "compare"):
        out[page] = {"available": True, "reason": None}
    out["cluster"] = {"available": ranks_in_folder >= 2,
                      "reason": None if ranks_in_folder >= 2 else
                      "a single rank: the cluster view needs the captures or traces of at least 2 ranks of one "
                      "job side by side in one folder"}
    return out
