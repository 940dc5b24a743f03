"""The phase vocabulary of the ``phase_spans`` table: the one definition.

Which phases a step is split into, why the device idled, their labels,
which names count as communication, synchronization or a phase's annotation,
and what a window without steps counts as one step (:func:`window_extents`).
The parser reads these to write ``phase_spans`` (the rules applying them are
in :mod:`mlprof.parse.phase_rules` and :mod:`mlprof.parse.attribution`); the
analyses, exports and pages read them to name and sum its rows. Nothing else
defines them.
"""

from __future__ import annotations

from mlprof.tables.store import TableStore

__all__ = [
    "HOST_PHASES", "DEVICE_PHASES", "IDLE_CAUSES", "PHASE_LABELS", "CAUSE_LABELS",
    "COMMUNICATION_PREFIXES", "ANNOTATION_WORDS", "SYNC_CALLS", "window_extents",
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

COMMUNICATION_PREFIXES = ("gloo:", "nccl:", "c10d::", "c10d:", "record_param_comms", "mpi:", "ucc:")

# Words of a user annotation or mstx range that name a phase (`## forward ##`,
# `load_batch`, `optimizer step`, `all_reduce grads`); neighbouring words are
# also read joined ("load batch" reads "loadbatch").
ANNOTATION_WORDS = (
    ("data_loading", frozenset({"dataloader", "dataloading", "loadbatch", "loaddata", "getbatch", "nextbatch",
                                "fetchbatch", "dataload", "prefetch", "inputpipeline"})),
    ("optimizer", frozenset({"optimizer", "optim", "optimizerstep", "optstep", "zerograd"})),
    ("backward", frozenset({"backward", "bwd", "backprop"})),
    ("forward", frozenset({"forward", "fwd"})),
    ("communication", frozenset({"allreduce", "allgather", "reducescatter", "alltoall", "broadcast", "barrier",
                                 "comm", "communication"})),
)
# Runtime calls that block the host until the device has drained (or an event fired).
SYNC_CALLS = ("cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventSynchronize",
              "cudaMemcpy", "hipDeviceSynchronize", "hipStreamSynchronize", "hipEventSynchronize", "hipMemcpy",
              # Ascend NPU (CANN runtime calls of a torch_npu import, docs/ascend.md)
              "AscendCL@aclrtSynchronizeDevice", "AscendCL@aclrtSynchronizeStream",
              "AscendCL@aclrtSynchronizeStreamWithTimeout", "AscendCL@aclrtSynchronizeEvent")


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
