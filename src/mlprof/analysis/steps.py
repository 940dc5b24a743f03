"""Step breakdown: where each step's time went, on the device and on the host.

Device view (traces with device ops), over the step's interval
[start_ns, end_ns) of the ``steps`` table, counting kernels, memcpy and memset:

* computing = time at least one non-communication device op runs;
* communication = time at least one communication kernel runs;
* overlapped = time both run; communication_not_overlapped = communication - overlapped;
* preparing = from the step start to the first device op of the step (0 when
  the step has no device op);
* free = the rest (the device idles after it started working).

so computing + communication_not_overlapped + preparing + free = step time.

Host view (all traces): top-level host ops of the step are classed as data
loading (DataLoader iteration), optimizer (Optimizer.step/zero_grad), backward
(autograd engine functions), communication (collectives run by the host:
gloo/nccl/c10d annotations, on whichever thread) or forward (any other op); a
moment covered by several classes counts for the first of that list, and time
covered by none is ``other_host``, so data_loading + forward + backward +
optimizer + host_communication + other_host = step time. Host communication
is thus the part of the collectives not hidden behind backward (the usual DDP
overlap) or the other classes before it. ``data_loading_ns`` is also the "preparing data" figure on GPU
traces (a host-side figure, not part of the device sum).
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from mlprof.analysis.intervals import union_length
from mlprof.tables.store import TableStore

__all__ = ["StepBreakdown", "step_breakdown", "classify_host_op"]


@dataclass(frozen=True)
class StepBreakdown:
    window: int
    step: int
    start_ns: int
    end_ns: int
    dur_ns: int
    # Device view; None when the trace has no device ops.
    computing_ns: int | None
    communication_ns: int | None
    overlapped_ns: int | None
    communication_not_overlapped_ns: int | None
    free_ns: int | None
    preparing_ns: int | None
    # Host view.
    data_loading_ns: int
    forward_ns: int
    backward_ns: int
    optimizer_ns: int
    host_communication_ns: int
    other_host_ns: int

    @classmethod
    def field_names(cls) -> list[str]:
        return [f.name for f in fields(cls)]


_CLASSES = ("data_loading", "optimizer", "backward", "communication", "forward")
_CLASS_FIELD = {"communication": "host_communication_ns"}  # "communication_ns" is the device view's
_COMMUNICATION_PREFIXES = ("gloo:", "nccl:", "c10d::", "record_param_comms", "mpi:", "ucc:")


def classify_host_op(name: str) -> str:
    """Host class of a top-level op name (see the module doc)."""
    if name.startswith("enumerate(DataLoader)") or "DataLoader" in name:
        return "data_loading"
    if name.startswith("Optimizer."):
        return "optimizer"
    if name.startswith("autograd::engine::evaluate_function") or name.endswith("Backward0") \
            or "backward" in name.lower():
        return "backward"
    if name.startswith(_COMMUNICATION_PREFIXES):
        return "communication"
    return "forward"


def _device_arrays(store: TableStore):
    got = store.sql(
        "SELECT window_index AS win, start_ns, start_ns + dur_ns AS end_ns, is_communication FROM device_ops "
        "WHERE kind IN ('kernel', 'memcpy', 'memset') AND dur_ns >= 0").fetchnumpy()
    return {k: np.asarray(v) for k, v in got.items()}


def _host_arrays(store: TableStore):
    # Top-level work of a step: ops directly under the ProfilerStep span, and
    # outermost ops on other threads (autograd engine threads on GPU jobs).
    got = store.sql(
        """
        SELECT h.window_index AS win, h.start_ns, h.start_ns + h.dur_ns AS end_ns, h.name
        FROM host_ops h LEFT JOIN host_ops p ON p.op_id = h.parent_op_id
        WHERE h.category <> 'python_function' AND h.name NOT LIKE 'ProfilerStep#%'
          AND (h.depth = 0 OR p.name LIKE 'ProfilerStep#%')
        """).fetchnumpy()
    names = got.pop("name")
    classes = np.array([_CLASSES.index(classify_host_op(str(n))) for n in names], dtype=np.int8)
    out = {k: np.asarray(v) for k, v in got.items()}
    out["cls"] = classes
    return out


class _Spans:
    """Intervals of one window sorted by start, to fetch those overlapping a step fast."""

    def __init__(self, arrays: dict, window: int, extra: str) -> None:
        sel = arrays["win"] == window
        order = np.argsort(arrays["start_ns"][sel], kind="stable")
        self.start = arrays["start_ns"][sel][order]
        self.end = arrays["end_ns"][sel][order]
        self.extra = arrays[extra][sel][order]
        self.max_dur = int((self.end - self.start).max()) if len(self.start) else 0

    def overlapping(self, lo: int, hi: int):
        # Only intervals starting in [lo - longest, hi) can overlap [lo, hi).
        a = np.searchsorted(self.start, lo - self.max_dur, side="left")
        b = np.searchsorted(self.start, hi, side="left")
        s, e, x = self.start[a:b], self.end[a:b], self.extra[a:b]
        keep = np.minimum(e, hi) > np.maximum(s, lo)
        return np.maximum(s[keep], lo), np.minimum(e[keep], hi), x[keep]


def step_breakdown(store: TableStore) -> list[StepBreakdown]:
    """One :class:`StepBreakdown` per row of the ``steps`` table."""
    steps = store.rows("SELECT window_index, step, start_ns, end_ns FROM steps ORDER BY window_index, start_ns")
    dev = _device_arrays(store)
    host = _host_arrays(store)
    has_device = len(dev["start_ns"]) > 0
    out = []
    spans: dict[int, tuple[_Spans, _Spans]] = {}
    for window, step, lo, hi in steps:
        if window not in spans:
            spans[window] = (_Spans(dev, window, "is_communication"), _Spans(host, window, "cls"))
        dev_spans, host_spans = spans[window]
        dur = hi - lo
        device_cols = dict.fromkeys(
            ("computing_ns", "communication_ns", "overlapped_ns", "communication_not_overlapped_ns",
             "free_ns", "preparing_ns"))
        if has_device:
            s, e, comm = dev_spans.overlapping(lo, hi)
            comm = comm.astype(bool)
            computing = union_length(s[~comm], e[~comm])
            communication = union_length(s[comm], e[comm])
            busy = union_length(s, e)
            overlapped = computing + communication - busy
            # A step with no device work at all is free time, not preparing.
            preparing = int(s.min()) - lo if len(s) else 0
            device_cols = {
                "computing_ns": computing, "communication_ns": communication,
                "overlapped_ns": overlapped, "communication_not_overlapped_ns": communication - overlapped,
                "free_ns": dur - busy - preparing, "preparing_ns": preparing,
            }
        hs, he, hc = host_spans.overlapping(lo, hi)
        covered = 0
        host_cols = {}
        for i, name in enumerate(_CLASSES):
            sel = hc <= i
            now = union_length(hs[sel], he[sel])
            host_cols[_CLASS_FIELD.get(name, f"{name}_ns")] = now - covered
            covered = now
        out.append(StepBreakdown(window=window, step=step, start_ns=lo, end_ns=hi, dur_ns=dur,
                                 **device_cols, **host_cols, other_host_ns=dur - covered))
    return out
