"""The phases of a training step, and which spans define them: the one definition.

Every analysis, export and page reads phases from the ``phase_spans`` table
that :mod:`mlprof.parse.attribution` writes with these rules; nothing else
decides what counts as data loading, forward, backward, optimizer or
communication.

A span *defines* a phase when its name says so (``enumerate(DataLoader)#...``,
``Optimizer.step#...``, ``autograd::engine::evaluate_function: ...``,
``gloo:all_reduce``, an ``nn.Module`` call, or a user annotation / mstx range
such as ``## forward ##`` or ``load_batch``). Ops inside a span inherit its
phase; the innermost defining span wins, so forward and backward run inside
``Optimizer.step(closure)`` are forward and backward, and an ``## optimizer ##``
annotation nested in a step is the optimizer.
"""

from __future__ import annotations

import re

__all__ = [
    "HOST_PHASES", "DEVICE_PHASES", "IDLE_CAUSES", "PHASE_LABELS", "CAUSE_LABELS",
    "span_phase", "idle_cause", "is_sync_call", "COMMUNICATION_PREFIXES", "SYNC_CALLS",
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

_WORD = re.compile(r"[a-z0-9]+")
# Words of a user annotation or mstx range that name a phase (`## forward ##`,
# `load_batch`, `optimizer step`, `all_reduce grads`).
_ANNOTATION_WORDS = (
    ("data_loading", {"dataloader", "dataloading", "loadbatch", "loaddata", "getbatch", "nextbatch", "fetchbatch",
                      "dataload", "prefetch", "inputpipeline"}),
    ("optimizer", {"optimizer", "optim", "optimizerstep", "optstep", "zerograd"}),
    ("backward", {"backward", "bwd", "backprop"}),
    ("forward", {"forward", "fwd"}),
    ("communication", {"allreduce", "allgather", "reducescatter", "alltoall", "broadcast", "barrier", "comm",
                       "communication"}),
)
# Runtime calls that block the host until the device has drained (or an event fired).
SYNC_CALLS = ("cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventSynchronize",
              "cudaMemcpy", "hipDeviceSynchronize", "hipStreamSynchronize", "hipEventSynchronize", "hipMemcpy",
              # Ascend NPU (CANN runtime calls of a torch_npu import, docs/ascend.md)
              "AscendCL@aclrtSynchronizeDevice", "AscendCL@aclrtSynchronizeStream",
              "AscendCL@aclrtSynchronizeStreamWithTimeout", "AscendCL@aclrtSynchronizeEvent")


def _annotation_phase(name: str) -> str | None:
    words = _WORD.findall(name.lower())
    # Also join neighbours so "load batch", "load_batch" and "loadBatch" all read "loadbatch".
    keys = set(words) | {a + b for a, b in zip(words, words[1:])}
    named = [phase for phase, vocabulary in _ANNOTATION_WORDS if keys & vocabulary]
    # "fwd_bwd" or "forward and backward" spans several phases: it defines none.
    return named[0] if len(named) == 1 else None


def span_phase(name: str, annotation: bool) -> str | None:
    """The phase a span defines, or None when it only inherits one.

    ``annotation`` is True for user annotations and mstx ranges, whose words
    are read; framework op names are matched by their fixed forms only.
    """
    if name.startswith("ProfilerStep#"):
        return None
    if name.startswith("enumerate(DataLoader)") or "DataLoader" in name:
        return "data_loading"
    if name.startswith("Optimizer."):
        return "optimizer"
    if name.startswith("autograd::engine::evaluate_function") or name.endswith(("Backward0", "Backward1")):
        return "backward"
    if name.startswith(COMMUNICATION_PREFIXES):
        return "communication"
    if name.startswith("nn.Module:"):
        return "forward"
    if annotation and not name.startswith("aten::"):
        return _annotation_phase(name)
    return None


def idle_cause(host_phase: str) -> str:
    """Why the device idled while the step's host thread was in ``host_phase``."""
    if host_phase in ("data_loading", "python", "gc", "communication"):
        return host_phase
    return "launch"


def is_sync_call(name: str) -> bool:
    """A device runtime call that blocks the host until the device has drained."""
    return name in SYNC_CALLS
