"""The phase vocabulary of the ``phase_spans`` table: the one definition.

Which phases a step is split into, why the device idled, their labels, and
what a window without steps counts as one step (:func:`window_extents`). The
names that define a phase (communication, data loading, synchronising calls,
annotation words) are in :mod:`mlprof.tables.names`.
The parser reads these to write ``phase_spans`` (the rules applying them are
in :mod:`mlprof.parse.phase_rules` and :mod:`mlprof.parse.attribution`); the
analyses, exports and pages read them to name and sum its rows. Nothing else
defines them.
"""

from __future__ import annotations

from mlprof.tables.store import TableStore

__all__ = [
    "HOST_PHASES", "DEVICE_PHASES", "IDLE_CAUSES", "PHASE_LABELS", "CAUSE_LABELS", "window_extents",
]

# Host view: every nanosecond of a step is exactly one of these.
HOST_PHASES = ("data_loading", "forward", "backward", "optimizer", "communication", "gc", "python", "other")
# Device view: busy by kind (compute wins over communication, then copies), else idle.
DEVICE_PHASES = ("compute", "communication", "memcpy", "memset", "idle")
# Why the device idled: what the step's host thread was doing meanwhile.
IDLE_CAUSES = ("data_loading", "synchronization", "python", "gc", "launch", "communication")

PHASE_LABELS = {
    "data_loading": "data loading", "forward": "forward", "backward": "backward", "optimizer": "optimizer",
    "communication": "communication", "gc": "garbage collection", "python": "Python outside ops",
    "other": "other ops", "compute": "compute", "memcpy": "memcpy", "memset": "memset", "idle": "idle",
}
CAUSE_LABELS = {
    "data_loading": "host loading data", "synchronization": "host synchronizing with the device",
    "python": "host in Python outside ops", "gc": "host in garbage collection",
    "launch": "host busy issuing work (launch-bound)", "communication": "host in communication",
}


def window_extents(store: TableStore) -> list[tuple[int, int, int]]:
    """(window, first start, last end) of all host and device events of each window with any.

    A window without steps (benchmarks, inference traces) is attributed, and
    advised, as one step spanning this extent.
    """
    return store.rows("""
        SELECT window_index, min(s), max(e) FROM (
            SELECT window_index, start_ns AS s, start_ns + dur_ns AS e FROM host_ops
            UNION ALL SELECT window_index, start_ns, start_ns + dur_ns FROM runtime_calls
            UNION ALL SELECT window_index, start_ns, start_ns + dur_ns FROM device_ops)
        GROUP BY window_index HAVING max(e) > min(s) ORDER BY window_index""")
