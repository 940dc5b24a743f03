"""Step breakdown: where each step's time went, summed from the attribution.

Every figure is a sum of ``phase_spans`` rows (written once at parse time by
:mod:`mlprof.parse.attribution`), so the host phases of a step add up to the
step exactly, and so do the device phases:

* host: data_loading + forward + backward + optimizer + host_communication
  + gc + python + other = step time;
* device (traces with device work): computing (kernels, memcpy, memset,
  hidden communication included) + communication_not_overlapped + preparing
  + free = step time, where preparing is the idle time before the step's
  first device work and free the idle time after it; the ``idle_*`` fields
  split preparing + free by what the host was doing meanwhile.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from mlprof.tables.names import step_span_sql
from mlprof.tables.phases import HOST_PHASES, IDLE_CAUSES
from mlprof.tables.store import TableStore

__all__ = ["StepBreakdown", "step_breakdown", "data_loading_spans", "HOST_FIELDS", "IDLE_FIELDS", "DEVICE_FIELDS"]

# Host phase -> StepBreakdown field ("communication_ns" is the device view's).
HOST_FIELDS = {p: ("host_communication_ns" if p == "communication" else f"{p}_ns") for p in HOST_PHASES}
IDLE_FIELDS = {c: f"idle_{c}_ns" for c in IDLE_CAUSES}
# The device view of a step, partitioning it as the host fields do: field -> label (the pages and the
# comparison name it from here). Computing holds copies and sets too; communication only what it does not hide.
DEVICE_FIELDS = {
    "computing_ns": "computing (kernels, copies)",
    "communication_not_overlapped_ns": "communication not overlapped",
    "preparing_ns": "preparing (idle before the first device work)",
    "free_ns": "free (idle after it)",
}


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
    idle_data_loading_ns: int | None
    idle_synchronization_ns: int | None
    idle_python_ns: int | None
    idle_gc_ns: int | None
    idle_launch_ns: int | None
    idle_communication_ns: int | None
    # Host view (the step's thread).
    data_loading_ns: int
    forward_ns: int
    backward_ns: int
    optimizer_ns: int
    host_communication_ns: int
    gc_ns: int
    python_ns: int
    other_ns: int

    @classmethod
    def field_names(cls) -> list[str]:
        return [f.name for f in fields(cls)]

    @property
    def idle_ns(self) -> int | None:
        return None if self.free_ns is None else self.free_ns + (self.preparing_ns or 0)


def step_breakdown(store: TableStore) -> list[StepBreakdown]:
    """One :class:`StepBreakdown` per row of the ``steps`` table."""
    steps = store.rows("SELECT window_index, step, start_ns, end_ns FROM steps ORDER BY window_index, start_ns")
    sums: dict[tuple, dict[str, int]] = {}
    for window, step, view, phase, cause, overlapped, dur in store.rows("""
            SELECT window_index, step, view, phase, coalesce(cause, ''), coalesce(overlapped, false), sum(dur_ns)
            FROM phase_spans GROUP BY ALL"""):
        sums.setdefault((window, step), {})[(view, phase, cause, bool(overlapped))] = int(dur)
    has_device = store.rows("SELECT count(*) FROM phase_spans WHERE view = 'device'")[0][0] > 0
    preparing = _preparing(store) if has_device else {}
    out = []
    for window, step, lo, hi in steps:
        got = sums.get((window, step), {})

        def total(view: str, phase: str | None = None, cause: str | None = None,
                  overlapped: bool | None = None) -> int:
            return sum(v for (vw, ph, ca, ov), v in got.items()
                       if vw == view and (phase is None or ph == phase) and (cause is None or ca == cause)
                       and (overlapped is None or ov == overlapped))

        host = {field: total("host", phase) for phase, field in HOST_FIELDS.items()}
        device: dict[str, int | None] = dict.fromkeys(
            ("computing_ns", "communication_ns", "overlapped_ns", "communication_not_overlapped_ns", "free_ns",
             "preparing_ns", *IDLE_FIELDS.values()))
        if has_device:
            overlapped = total("device", "compute", overlapped=True)
            not_overlapped = total("device", "communication")
            idle = total("device", "idle")
            prep = preparing.get((window, step), 0)
            device = {
                "computing_ns": total("device", "compute") + total("device", "memcpy") + total("device", "memset"),
                "communication_ns": not_overlapped + overlapped, "overlapped_ns": overlapped,
                "communication_not_overlapped_ns": not_overlapped, "preparing_ns": prep, "free_ns": idle - prep,
                **{field: total("device", "idle", cause) for cause, field in IDLE_FIELDS.items()},
            }
        out.append(StepBreakdown(window=window, step=step, start_ns=lo, end_ns=hi, dur_ns=hi - lo,
                                 **device, **host))
    return out


def _preparing(store: TableStore) -> dict[tuple[int, int], int]:
    """Device idle from the step start to its first device work (0 when the step had none).

    Idle is split by cause, so this sums every idle span before the first busy one.
    """
    rows = store.rows("""
        WITH first_busy AS (
            SELECT window_index, step, min(start_ns) AS busy_ns FROM phase_spans
            WHERE view = 'device' AND phase <> 'idle' GROUP BY window_index, step)
        SELECT p.window_index, p.step, sum(p.dur_ns)
        FROM phase_spans p JOIN first_busy f ON f.window_index = p.window_index AND f.step = p.step
        WHERE p.view = 'device' AND p.phase = 'idle' AND p.end_ns <= f.busy_ns
        GROUP BY p.window_index, p.step""")
    return {(w, s): int(d) for w, s, d in rows}


def data_loading_spans(store: TableStore, step: int | None = None) -> list[dict]:
    """The data-loading phase of each step, span by span, named by the op that opens it (if any)."""
    cond = "" if step is None else "AND p.step = ?"
    return store.dicts(f"""
        SELECT p.step, coalesce(min(h.name), '(no op: Python)') AS name, p.tid, p.start_ns, p.dur_ns
        FROM phase_spans p LEFT JOIN host_ops h
          ON h.window_index = p.window_index AND h.tid = p.tid AND h.start_ns = p.start_ns
         AND NOT {step_span_sql('h.name')}
        WHERE p.view = 'host' AND p.phase = 'data_loading' {cond}
        GROUP BY p.window_index, p.step, p.tid, p.start_ns, p.dur_ns
        ORDER BY p.start_ns, p.window_index, p.tid""", [] if step is None else [step])
