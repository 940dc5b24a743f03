"""Step time by category: the split the TensorBoard PyTorch profiler's overview showed.

Kernel, memcpy, memset, communication, runtime, data loading, CPU exec and
other, per step, summing to the step. It is a relabelling of the attribution
(``phase_spans``, written once at parse time), not a second attribution:

* on runs with device work, the device view decides: busy time goes to what
  ran (kernels, copies, sets, communication not hidden behind compute); idle
  time goes to what the host was doing meanwhile (its ``cause``), and the part
  of launch-bound idle the host spent inside runtime calls (launches, syncs)
  is ``runtime``; the step thread's data loading is ``data_loading`` whatever the device did meanwhile
  (the step breakdown's data loading time);
* on CPU-only runs the host view decides: framework ops (forward, backward,
  optimizer, other) are ``cpu_exec``; Python outside ops and GC are ``other``.
"""

from __future__ import annotations

from mlprof.tables.store import TableStore

__all__ = ["CATEGORIES", "CATEGORY_LABELS", "DEVICE_CATEGORY", "HOST_CATEGORY", "step_categories"]

CATEGORIES = ("kernel", "memcpy", "memset", "communication", "runtime", "data_loading", "cpu_exec", "other")
CATEGORY_LABELS = {
    "kernel": "kernel", "memcpy": "memcpy", "memset": "memset", "communication": "communication",
    "runtime": "runtime", "data_loading": "data loading", "cpu_exec": "CPU exec", "other": "other",
}
# Device view: (phase, idle cause) -> category. Idle while the host ran ops is
# CPU exec (the host could not issue work fast enough), except what runtime calls took.
DEVICE_CATEGORY = {
    ("compute", ""): "kernel", ("memcpy", ""): "memcpy", ("memset", ""): "memset",
    ("communication", ""): "communication",
    ("idle", "data_loading"): "data_loading", ("idle", "communication"): "communication",
    ("idle", "synchronization"): "runtime", ("idle", "launch"): "cpu_exec",
    ("idle", "python"): "other", ("idle", "gc"): "other",
}
# Host view (runs without device work): phase -> category.
HOST_CATEGORY = {
    "data_loading": "data_loading", "communication": "communication", "forward": "cpu_exec",
    "backward": "cpu_exec", "optimizer": "cpu_exec", "other": "cpu_exec", "python": "other", "gc": "other",
}


def step_categories(store: TableStore) -> list[dict]:
    """One row per step: ``{window, step, start_ns, dur_ns, view, <category>_ns...}``; categories sum to dur_ns."""
    has_device = store.rows("SELECT count(*) FROM phase_spans WHERE view = 'device'")[0][0] > 0
    view = "device" if has_device else "host"
    sums: dict[tuple[int, int], dict[str, int]] = {}
    for window, step, phase, cause, dur in store.rows("""
            SELECT window_index, step, phase, coalesce(cause, ''), sum(dur_ns) FROM phase_spans
            WHERE view = ? GROUP BY ALL""", [view]):
        cat = DEVICE_CATEGORY.get((phase, cause), "other") if has_device else HOST_CATEGORY.get(phase, "other")
        got = sums.setdefault((window, step), {})
        got[cat] = got.get(cat, 0) + int(dur)
    if has_device:
        # The step's batch is loaded while the device may still run the last step's kernels; the step waits
        # for it all the same. Data loading is the step thread's data loading time, one definition with the
        # step breakdown and the data loading page (a device-idle-only share said 0.309% where the trace's
        # `## data_load ##` spans sum to 0.628% of trace_filter rank 0's steps).
        for window, step, phase, cause, ns in _device_time_in_data_loading(store):
            cat = DEVICE_CATEGORY.get((phase, cause), "other")
            if cat == "data_loading":
                continue
            got = sums.setdefault((window, step), {})
            got[cat] = got.get(cat, 0) - int(ns)
            got["data_loading"] = got.get("data_loading", 0) + int(ns)
        for window, step, ns in _runtime_in_launch_idle(store):
            got = sums.setdefault((window, step), {})
            moved = min(int(ns), got.get("cpu_exec", 0))
            got["cpu_exec"] = got.get("cpu_exec", 0) - moved
            got["runtime"] = got.get("runtime", 0) + moved
    out = []
    for window, step, start, dur in store.rows(
            "SELECT window_index, step, start_ns, dur_ns FROM steps ORDER BY window_index, start_ns"):
        got = sums.get((window, step), {})
        out.append({"window": window, "step": step, "start_ns": start, "dur_ns": dur, "view": view,
                    **{f"{c}_ns": got.get(c, 0) for c in CATEGORIES}})
    return out


def _device_time_in_data_loading(store: TableStore) -> list[tuple]:
    """Per step and device phase: device-view time inside the step thread's data loading spans."""
    return store.rows("""
        WITH dl AS (SELECT window_index, step, start_ns, end_ns FROM phase_spans
                    WHERE view = 'host' AND phase = 'data_loading')
        SELECT d.window_index, d.step, d.phase, coalesce(d.cause, ''),
               sum(least(d.end_ns, l.end_ns) - greatest(d.start_ns, l.start_ns))
        FROM phase_spans d JOIN dl l ON l.window_index = d.window_index AND l.step = d.step
         AND d.start_ns < l.end_ns AND d.end_ns > l.start_ns
        WHERE d.view = 'device' GROUP BY ALL""")


def _runtime_in_launch_idle(store: TableStore) -> list[tuple]:
    """Per step: launch-bound device idle during which the step's host thread was in a runtime call."""
    return store.rows("""
        WITH idle AS (SELECT window_index, step, start_ns, end_ns FROM phase_spans
                      WHERE view = 'device' AND phase = 'idle' AND cause = 'launch'),
             thread AS (SELECT DISTINCT window_index, step, tid FROM phase_spans WHERE view = 'host')
        SELECT i.window_index, i.step,
               sum(least(i.end_ns, r.start_ns + r.dur_ns) - greatest(i.start_ns, r.start_ns))
        FROM idle i JOIN thread t USING (window_index, step)
        JOIN runtime_calls r ON r.window_index = i.window_index AND r.tid = t.tid
         AND r.start_ns < i.end_ns AND r.start_ns + r.dur_ns > i.start_ns
        GROUP BY i.window_index, i.step""")
