"""Kineto events to numpy columns: the typed event structs and the per-chunk work.

The events of a chunk are decoded by msgspec into :class:`_Event` structs
whose ``args`` hold only the keys the tables use; each chunk is then split by
kind and turned straight into numpy column arrays. Repeated strings (op
names, shapes) become integer codes in one :class:`StringPool`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated, Union

import msgspec
import numpy as np

from mlprof.parse.kineto_times import (EMPTY_RAW, MAX_US, TimeRangeError, decimal_us_to_ns, dur_column, exact_times,
                                      exact_ts_of_raws, needs_exact_times, ns_column)
from mlprof.tables.names import COMMUNICATION_KERNEL, collective_kind

__all__ = ["KinetoColumns", "StringPool", "Accumulator", "MISSING", "FLOW_START", "FLOW_END",
           "EVENTS_DECODER", "TS_TEXT_EVENTS_DECODER", "LIST_DECODER", "TOP_DECODER", "TopLevel", "split_chunk",
           "TimeRangeError", "MAX_US", "decimal_us_to_ns", "first_bad_field", "StringTooLongError", "MAX_STRING_CHARS",
           "MalformedEventError", "NO_NAME"]

# Sentinel of absent integer fields inside the numpy columns (turned to NULL
# when the tables are written). No real id, size or time takes this value.
MISSING = np.iinfo(np.int64).min

# Numeric args are accepted as strings too (ROCm writes "stream": "0x0").
Num = Union[int, float, str, None]
_M = -(2**63)  # MISSING, spelled before numpy is needed in class bodies
Loose = Union[int, float, str, None]


class _Args(msgspec.Struct, gc=False):
    """The ``args`` keys the tables use; every other key is skipped by msgspec."""

    external_id: Num = msgspec.field(default=_M, name="External id")
    correlation: Num = _M
    device: Num = _M
    stream: Num = _M
    grid: msgspec.Raw = EMPTY_RAW
    block: msgspec.Raw = EMPTY_RAW
    bytes: Num = _M
    sequence_number: Num = msgspec.field(default=_M, name="Sequence number")
    fwd_thread_id: Num = msgspec.field(default=_M, name="Fwd thread id")
    input_dims: msgspec.Raw = msgspec.field(default=EMPTY_RAW, name="Input Dims")
    input_types: msgspec.Raw = msgspec.field(default=EMPTY_RAW, name="Input type")
    registers: Num = msgspec.field(default=_M, name="registers per thread")
    shared_memory: Num = msgspec.field(default=_M, name="shared memory")
    occupancy: Num = msgspec.field(default=_M, name="est. achieved occupancy %")
    collective_name: Loose = msgspec.field(default=None, name="Collective name")
    in_nelems: Num = msgspec.field(default=_M, name="In msg nelems")
    out_nelems: Num = msgspec.field(default=_M, name="Out msg nelems")
    group_size: Num = msgspec.field(default=_M, name="Group size")
    dtype: Loose = None
    in_split: msgspec.Raw = msgspec.field(default=EMPTY_RAW, name="In split size")
    out_split: msgspec.Raw = msgspec.field(default=EMPTY_RAW, name="Out split size")
    pg_name: Loose = msgspec.field(default=None, name="Process Group Name")
    pg_desc: Loose = msgspec.field(default=None, name="Process Group Description")
    pg_ranks: msgspec.Raw = msgspec.field(default=EMPTY_RAW, name="Process Group Ranks")
    # [memory] instant events
    device_type: Num = msgspec.field(default=_M, name="Device Type")
    device_id: Num = msgspec.field(default=_M, name="Device Id")
    addr: Num = msgspec.field(default=_M, name="Addr")
    mem_bytes: Num = msgspec.field(default=_M, name="Bytes")
    total_allocated: Num = msgspec.field(default=_M, name="Total Allocated")
    total_reserved: Num = msgspec.field(default=_M, name="Total Reserved")
    # metadata (M) events
    name: Loose = None
    labels: Loose = None
    sort_index: Num = _M




# Longest string (event name, category, raw args text) kept: 1 MiB. A longer
# one is refused with its JSON path, so one hostile string cannot blow memory
# up many times its size. Names and categories are checked by the decoder
# (every event's, kept or not); pooled strings on new distinct ones (cheap).
MAX_STRING_CHARS = 2**20
_Text = Annotated[str, msgspec.Meta(max_length=MAX_STRING_CHARS)]
# The name of an event that has none (no JSON text decodes to it by chance): an
# event the tables keep needs its name, so such a trace is refused, not read as
# ops named "".
NO_NAME = "\x00mlprof: no name\x00"


class MalformedEventError(ValueError):
    """An event the tables would keep lacks a field it needs (ph, name, ts)."""


class _Event(msgspec.Struct, gc=False):
    # Every Chrome trace event has a phase: without one it is no event (refused at decode).
    ph: str
    name: _Text = NO_NAME
    cat: _Text = ""
    pid: Union[int, str] = 0
    tid: Union[int, str] = 0
    # NaN = absent: every event but metadata ('M') needs a time (refused, not read as 0).
    ts: float = float("nan")
    # NaN = absent: a complete ('X') event without a duration is refused.
    dur: float = float("nan")
    id: Union[int, str, None] = None
    # Decoded in the same pass as the event: one decoder call per chunk,
    # not one per event. Counter ('C') events are re-read for their raw args.
    args: _Args = msgspec.field(default_factory=_Args)


class _EventTsText(_Event, gc=False):
    """An event with its ts as raw text: for parts of a trace whose times a double cannot hold
    (:data:`TS_TEXT_EVENTS_DECODER`); turned to exact int ns before the columns are made."""

    ts: msgspec.Raw = EMPTY_RAW


class TopLevel(msgspec.Struct, gc=False):
    # None: the key is absent, so this is no Kineto/Chrome trace at all.
    traceEvents: Union[list[msgspec.Raw], None] = None
    baseTimeNanoseconds: Union[int, None] = None
    schemaVersion: msgspec.Raw = EMPTY_RAW
    deviceProperties: msgspec.Raw = EMPTY_RAW
    distributedInfo: msgspec.Raw = EMPTY_RAW
    traceName: msgspec.Raw = EMPTY_RAW
    displayTimeUnit: msgspec.Raw = EMPTY_RAW
    record_shapes: msgspec.Raw = EMPTY_RAW
    trace_id: msgspec.Raw = EMPTY_RAW
    host_name: msgspec.Raw = EMPTY_RAW


TOP_DECODER = msgspec.json.Decoder(TopLevel)
LIST_DECODER = msgspec.json.Decoder(list[msgspec.Raw])
EVENTS_DECODER = msgspec.json.Decoder(list[_Event])
TS_TEXT_EVENTS_DECODER = msgspec.json.Decoder(list[_EventTsText])


class _RawArgs(msgspec.Struct):
    args: dict = {}


_RAW_ARGS_DECODER = msgspec.json.Decoder(_RawArgs)

HOST_CATEGORIES = frozenset({"cpu_op", "user_annotation", "python_function", "Operator"})
# MTIA: mtia_runtime are its runtime API calls, mtia_ccp_events the work on
# the device (as Holistic Trace Analysis reads them).
RUNTIME_CATEGORIES = frozenset({"cuda_runtime", "cuda_driver", "Runtime", "mtia_runtime"})
DEVICE_KINDS = {
    "kernel": "kernel",
    "Kernel": "kernel",
    "mtia_ccp_events": "kernel",
    "gpu_memcpy": "memcpy",
    "Memcpy": "memcpy",
    "gpu_memset": "memset",
    "Memset": "memset",
    "cuda_sync": "sync",
}


FLOW_START, FLOW_STEP, FLOW_END = 0, 1, 2
_FLOW_PHASES = {"s": FLOW_START, "t": FLOW_STEP, "f": FLOW_END}


class StringTooLongError(ValueError):
    """A string longer than MAX_STRING_CHARS."""


class StringPool:
    """Interns strings to dense integer codes; code -1 is NULL."""

    # None and b"" (an absent raw JSON value) are NULL.
    _NULLS = 2

    def __init__(self) -> None:
        self._codes: dict[str | bytes | None, int] = {None: -1, b"": -1}

    def code(self, value: str | None) -> int:
        codes = self._codes
        if value not in codes:
            codes[value] = len(codes) - self._NULLS
        return codes[value]

    def codes(self, values: list) -> np.ndarray:
        codes = self._codes
        try:  # after the first chunks nearly every chunk has no new string: one C-level map
            return np.fromiter(map(codes.__getitem__, values), dtype=np.int32, count=len(values))
        except KeyError:
            pass
        # dict.fromkeys finds the chunk's distinct strings at C speed; only
        # new ones get a code, then one C-level map looks all of them up.
        for value in dict.fromkeys(values):
            if value not in codes:
                if value is not None and len(value) > MAX_STRING_CHARS:
                    raise StringTooLongError(f"a string of {len(value):,} characters (at most {MAX_STRING_CHARS:,})")
                codes[value] = len(codes) - self._NULLS
        return np.fromiter(map(codes.__getitem__, values), dtype=np.int32, count=len(values))

    def __contains__(self, value) -> bool:
        return value in self._codes

    def keys(self) -> list:
        """The pooled keys (str, or bytes of raw JSON), indexed by code."""
        return [v for v in self._codes if v is not None and v != b""]

    def values(self) -> list[str]:
        """All strings, indexed by code (raw JSON values decoded to text)."""
        return [v.decode("utf-8", "replace") if isinstance(v, bytes) else v
                for v in self._codes if v is not None and v != b""]


@dataclass
class KinetoColumns:
    """Column arrays of one trace, per kind of event, before table building.

    String columns hold :class:`StringPool` codes; integer columns use
    :data:`MISSING` for absent values; times are absolute ns.
    """

    base_time_ns: int
    metadata: dict[str, bytes] = field(default_factory=dict)
    host: dict[str, np.ndarray] = field(default_factory=dict)
    runtime: dict[str, np.ndarray] = field(default_factory=dict)
    device: dict[str, np.ndarray] = field(default_factory=dict)
    collectives: dict[str, np.ndarray] = field(default_factory=dict)
    flows: dict[str, np.ndarray] = field(default_factory=dict)
    memory: dict[str, np.ndarray] = field(default_factory=dict)
    instants: dict[str, np.ndarray] = field(default_factory=dict)
    device_annotations: dict[str, np.ndarray] = field(default_factory=dict)
    counters: dict[str, np.ndarray] = field(default_factory=dict)
    threads: list[tuple[int, int | None, str, str]] = field(default_factory=list)
    unknown: Counter = field(default_factory=Counter)
    event_count: int = 0


def _ints(values: list) -> np.ndarray:
    # Absent keys already hold MISSING (the _Args defaults); only an explicit
    # JSON null or a float needs the slow path.
    try:
        return np.array(values, dtype=np.int64)
    except (TypeError, ValueError, OverflowError):
        return np.array([_to_int(v) for v in values], dtype=np.int64)


def _to_int(value) -> int:
    if value is None:
        return MISSING
    if isinstance(value, str):
        try:
            return int(value, 0)
        except ValueError:
            return MISSING
    return int(value)


def _pidtid(values: list) -> np.ndarray:
    # String pids/tids ("Spans", "PyTorch Profiler") only appear on rows the
    # tables do not keep; anything else non-numeric becomes MISSING.
    try:
        return np.array(values, dtype=np.int64)
    except (TypeError, ValueError, OverflowError):
        return np.fromiter(
            (v if type(v) is int else MISSING for v in values), dtype=np.int64, count=len(values))


def _raw_text(pool: StringPool, raws: list) -> np.ndarray:
    if not any(raws):
        return np.full(len(raws), -1, dtype=np.int32)
    # bytes keys: decoded to text once per distinct value, in StringPool.values().
    # One join and one split copy all the values at C speed (JSON text holds
    # no NUL byte; should a value hold one, the count tells, and each value is
    # copied on its own).
    texts = b"\0".join(raws).split(b"\0")
    if len(texts) != len(raws):
        texts = list(map(bytes, raws))
    return pool.codes(texts)


class Accumulator:
    """Collects per-chunk column arrays and concatenates them at the end."""

    def __init__(self) -> None:
        self.parts: dict[str, list[np.ndarray]] = {}

    def add(self, columns: dict[str, np.ndarray]) -> None:
        for key, arr in columns.items():
            self.parts.setdefault(key, []).append(arr)

    def result(self) -> dict[str, np.ndarray]:
        """The columns; the parts are dropped column by column, so memory holds
        the columns and one column's parts, not every part and every column."""
        out = {}
        while self.parts:
            key = next(iter(self.parts))
            out[key] = np.concatenate(self.parts.pop(key))
        return out


def _decode_args(events: list[_Event]) -> list[_Args]:
    return [e.args for e in events]


def split_chunk(events: list[_Event], raws: list[msgspec.Raw] | Callable[[], list[msgspec.Raw]], base_ns: int,
                pool: StringPool, cols: KinetoColumns, accs,
                exact_ts: Callable[[], list[int]] | None = None) -> None:
    """Add the columns of one chunk of events to ``accs`` (per kind of event).

    ``raws``: the events' raw JSON text, or a function that gives it (it is
    only read for counter events and for times a double cannot hold).
    ``exact_ts``: a function giving the events' exact ts in ns, for times a
    double cannot hold (else they are read from ``raws``).
    """
    if events and type(events[0].ts) is not int and needs_exact_times(events):  # int: read exactly already
        exact_times(events, exact_ts() if exact_ts is not None else exact_ts_of_raws(_raws_of(raws)))
    host, runtime, device, flows, instants, dev_ann, counters = [], [], [], [], [], [], []
    unknown = cols.unknown
    for i, e in enumerate(events):
        ph = e.ph
        if ph == "X":
            cat = e.cat
            if cat in HOST_CATEGORIES:
                host.append(e)
            elif cat in RUNTIME_CATEGORIES:
                runtime.append(e)
            elif cat in DEVICE_KINDS:
                device.append(e)
            elif cat == "gpu_user_annotation":
                dev_ann.append(e)
            else:
                unknown[(ph, cat)] += 1
        elif ph == "s" or ph == "f" or ph == "t":
            flows.append(e)
        elif ph == "i" or ph == "I":
            instants.append(e)
        elif ph == "M":
            _metadata_event(e, cols)
        elif ph == "C":
            counters.append(i)
        else:
            if not ph:
                raise MalformedEventError("an event with an empty ph")
            unknown[(ph, e.cat)] += 1
    if host:
        _host_columns(host, base_ns, pool, accs["host"])
    if runtime:
        args = _decode_args(runtime)
        accs["runtime"].add({
            "name": pool.codes([e.name for e in runtime]),
            "category": pool.codes([e.cat for e in runtime]),
            "pid": _pidtid([e.pid for e in runtime]),
            "tid": _pidtid([e.tid for e in runtime]),
            "start_ns": ns_column([e.ts for e in runtime], base_ns),
            "dur_ns": dur_column([e.dur for e in runtime]),
            "correlation": _ints([a.correlation for a in args]),
            "external_id": _ints([a.external_id for a in args]),
        })
    if device:
        _device_columns(device, base_ns, pool, accs)
    if flows:
        accs["flows"].add({
            "ph": np.array([_FLOW_PHASES[e.ph] for e in flows], dtype=np.int8),
            "category": pool.codes([e.cat for e in flows]),
            "flow_id": np.fromiter((_flow_id(e.id) for e in flows), dtype=np.int64, count=len(flows)),
            "pid": _pidtid([e.pid for e in flows]),
            "tid": _pidtid([e.tid for e in flows]),
            "ts_ns": ns_column([e.ts for e in flows], base_ns),
        })
    if instants:
        _instant_columns(instants, base_ns, pool, accs)
    if dev_ann:
        accs["device_annotations"].add({
            "name": pool.codes([e.name for e in dev_ann]),
            "pid": _pidtid([e.pid for e in dev_ann]),
            "tid": _pidtid([e.tid for e in dev_ann]),
            "start_ns": ns_column([e.ts for e in dev_ann], base_ns),
            "dur_ns": dur_column([e.dur for e in dev_ann]),
        })
    if counters:
        chunk_raws = _raws_of(raws)
        _counter_columns([(events[i], chunk_raws[i]) for i in counters], base_ns, pool, accs)
    if NO_NAME in pool:  # a kept event without a name (one dict lookup a chunk, not a test an event)
        raise MalformedEventError("an event without a name")


def _raws_of(raws) -> list:
    return raws() if callable(raws) else raws


def _flow_id(value) -> int:
    if type(value) is int:
        return value
    if isinstance(value, str):
        try:
            return int(value, 0)
        except ValueError:
            return hash(value) & 0x1FFFFFFFFFFFFF
    return MISSING


def _host_columns(host: list[_Event], base_ns: int, pool: StringPool, acc: Accumulator) -> None:
    args = _decode_args(host)
    acc.add({
        "name": pool.codes([e.name for e in host]),
        "category": pool.codes([e.cat for e in host]),
        "pid": _pidtid([e.pid for e in host]),
        "tid": _pidtid([e.tid for e in host]),
        "start_ns": ns_column([e.ts for e in host], base_ns),
        "dur_ns": dur_column([e.dur for e in host]),
        "external_id": _ints([a.external_id for a in args]),
        "sequence_number": _ints([a.sequence_number for a in args]),
        "fwd_thread_id": _ints([a.fwd_thread_id for a in args]),
        "input_dims": _raw_text(pool, [a.input_dims for a in args]),
        "input_types": _raw_text(pool, [a.input_types for a in args]),
    })


def _device_columns(device: list[_Event], base_ns: int, pool: StringPool, accs) -> None:
    args = _decode_args(device)
    rows_before = sum(len(a) for a in accs["device"].parts.get("name", ()))
    names = [e.name for e in device]
    is_comm = np.fromiter(
        (a.collective_name is not None and a.collective_name != MISSING or bool(COMMUNICATION_KERNEL.search(n)) for n, a in zip(names, args)),
        dtype=bool, count=len(device))
    columns = {
        "name": pool.codes(names),
        "kind": pool.codes([DEVICE_KINDS[e.cat] for e in device]),
        "device": _ints([a.device if a.device != MISSING else (e.pid if type(e.pid) is int else None)
                         for e, a in zip(device, args)]),
        "stream": _ints([a.stream if a.stream != MISSING else (e.tid if type(e.tid) is int else None)
                         for e, a in zip(device, args)]),
        "start_ns": ns_column([e.ts for e in device], base_ns),
        "dur_ns": dur_column([e.dur for e in device]),
        "correlation": _ints([a.correlation for a in args]),
        "external_id": _ints([a.external_id for a in args]),
        "grid": _raw_text(pool, [a.grid for a in args]),
        "block": _raw_text(pool, [a.block for a in args]),
        "size_bytes": _ints([a.bytes for a in args]),
        "registers_per_thread": _ints([a.registers for a in args]),
        "shared_memory_bytes": _ints([a.shared_memory for a in args]),
        "occupancy_pct": np.array([_to_float(a.occupancy)
                                   for a in args], dtype=np.float64),
        "is_communication": is_comm,
    }
    accs["device"].add(columns)
    comm_idx = np.flatnonzero(is_comm)
    if comm_idx.size:
        sel = [args[i] for i in comm_idx]
        accs["collectives"].add({
            "device_row": comm_idx.astype(np.int64) + rows_before,
            # Kineto's own name; else (in build) the launching op's; else the kernel's.
            "collective_name": pool.codes([_opt_str(a.collective_name) for a in sel]),
            "kernel_collective": pool.codes([collective_kind(names[i]) for i in comm_idx]),
            "group_name": pool.codes([_opt_str(a.pg_name) for a in sel]),
            "group_desc": pool.codes([_opt_str(a.pg_desc) for a in sel]),
            "group_ranks": _raw_text(pool, [a.pg_ranks for a in sel]),
            "group_size": _ints([a.group_size for a in sel]),
            "dtype": pool.codes([_opt_str(a.dtype) for a in sel]),
            "in_nelems": _ints([a.in_nelems for a in sel]),
            "out_nelems": _ints([a.out_nelems for a in sel]),
            "in_split_size": _raw_text(pool, [a.in_split for a in sel]),
            "out_split_size": _raw_text(pool, [a.out_split for a in sel]),
        })


def _to_float(value) -> float:
    if value is None or value == MISSING:
        return np.nan
    try:
        return float(value)
    except ValueError:
        return np.nan


def _opt_str(value) -> str | None:
    return None if value is None or value == MISSING else str(value)


def _instant_columns(instants: list[_Event], base_ns: int, pool: StringPool, accs) -> None:
    memory = [e for e in instants if e.name == "[memory]"]
    other = [e for e in instants if e.name != "[memory]"] if memory else instants
    if memory:
        args = _decode_args(memory)
        accs["memory"].add({
            "ts_ns": ns_column([e.ts for e in memory], base_ns),
            "pid": _pidtid([e.pid for e in memory]),
            "tid": _pidtid([e.tid for e in memory]),
            "device_type": _ints([a.device_type for a in args]),
            "device_id": _ints([a.device_id for a in args]),
            "addr": _ints([a.addr for a in args]),
            "size_bytes": _ints([a.mem_bytes for a in args]),
            "total_allocated_bytes": _ints([a.total_allocated for a in args]),
            "total_reserved_bytes": _ints([a.total_reserved for a in args]),
        })
    if other:
        accs["instants"].add({
            "name": pool.codes([e.name for e in other]),
            "pid": _pidtid([e.pid for e in other]),
            "tid": _pidtid([e.tid for e in other]),
            "start_ns": ns_column([e.ts for e in other], base_ns),
        })


def _counter_columns(counters: list[_Event], base_ns: int, pool: StringPool, accs) -> None:
    names, series, pids, ts, values = [], [], [], [], []
    for e, raw in counters:
        decoded = _RAW_ARGS_DECODER.decode(raw).args
        if not isinstance(decoded, dict):
            continue
        for key, value in decoded.items():
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                names.append(e.name)
                series.append(key)
                pids.append(e.pid)
                ts.append(e.ts)
                values.append(float(value))
    if names:
        accs["counters"].add({
            "name": pool.codes(names),
            "series": pool.codes(series),
            "pid": _pidtid(pids),
            "ts_ns": ns_column(ts, base_ns),
            "value": np.asarray(values, dtype=np.float64),
        })


def _metadata_event(e: _Event, cols: KinetoColumns) -> None:
    if e.name is NO_NAME:
        raise MalformedEventError("a metadata event without a name")
    if type(e.pid) is not int:
        cols.unknown[("M", e.name)] += 1
        return
    a = e.args
    value = a.name if e.name in ("process_name", "thread_name") else (
        a.labels if e.name == "process_labels" else a.sort_index)
    if value is None or value == MISSING:
        cols.unknown[("M", e.name)] += 1
        return
    tid = e.tid if (type(e.tid) is int and e.name.startswith("thread")) else None
    cols.threads.append((e.pid, tid, e.name, str(value)))


_INT64 = 2**63
# Phases whose events the tables keep by name (flows are matched by id; complete events by category).
_NAMED_PHASES = frozenset({"i", "I", "C", "M"})
# Phases whose events the tables keep with their time (complete events: by category).
_TIMED_PHASES = frozenset({"i", "I", "C", "s", "t", "f"})


def _kept_complete(cat: str) -> bool:
    return cat in HOST_CATEGORIES or cat in RUNTIME_CATEGORIES or cat in DEVICE_KINDS or cat == "gpu_user_annotation"


def first_bad_field(raw: bytes) -> str | None:
    """What makes one event unusable, as ``.field: problem`` (None if nothing).

    The slow path, only run on the events of a chunk that failed, to name
    the exact JSON path of the problem.
    """
    (e,) = EVENTS_DECODER.decode(b"[" + raw + b"]")
    if not e.ph:
        return ".ph: empty (every event needs its phase)"
    if e.name == NO_NAME and (e.ph in _NAMED_PHASES or e.ph == "X" and _kept_complete(e.cat)):
        return ".name: missing"
    if e.ts != e.ts and (e.ph in _TIMED_PHASES or e.ph == "X" and _kept_complete(e.cat)):
        return ".ts: missing (every event but metadata ('M') needs a time)"
    if e.ph == "X" and e.dur != e.dur:
        return ".dur: missing (a complete 'X' event needs a duration)"
    for name in ("ts", "dur"):
        value = getattr(e, name)
        if value == value and not abs(value) < MAX_US:
            return f".{name}: {value!r} µs is out of range"
    if e.dur < 0 and e.ph == "X" and _kept_complete(e.cat):
        return f".dur: {e.dur!r} µs is negative"
    for name in ("name", "cat"):
        if len(getattr(e, name)) > MAX_STRING_CHARS:
            return f".{name}: a string of {len(getattr(e, name)):,} characters (at most {MAX_STRING_CHARS:,})"
    for name in ("pid", "tid"):
        value = getattr(e, name)
        if type(value) is int and not -_INT64 <= value < _INT64:
            return f".{name}: integer {str(value)[:30]} does not fit 64 bits"
    for f in msgspec.structs.fields(_Args):
        value = getattr(e.args, f.name)
        if isinstance(value, (str, msgspec.Raw)) and len(value) > MAX_STRING_CHARS:
            return f".args.{f.encode_name}: {len(value):,} characters (at most {MAX_STRING_CHARS:,})"
        if type(value) is int and not -_INT64 <= value < _INT64:
            return f".args.{f.encode_name}: integer {str(value)[:30]} does not fit 64 bits"
    return None
