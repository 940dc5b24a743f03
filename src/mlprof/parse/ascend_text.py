"""Parser of torch_npu's text export (``*_ascend_pt/ASCEND_PROFILER_OUTPUT``).

``trace_view.json`` gives host ops (Python process), CANN runtime calls, the
Ascend Hardware tasks (for their connection ids and the memcpy tasks), the
HCCL communication ops, counters and flows; ``kernel_details.csv`` gives the
device tasks with their Ascend attributes and PMU metrics (one row per task:
the same rows the tool's own summaries add up); ``communication.json`` the
communication group of each collective; ``operator_memory.csv`` and
``memory_record.csv`` the memory. Times in these files are microseconds
written as text (``"ts": "1736408883688177.930"``) and become integer ns exactly.
"""

from __future__ import annotations

import csv
import json
from collections import defaultdict
from pathlib import Path
from typing import Annotated, Union

import msgspec

from mlprof.errors import CaptureError, TraceFormatError
from mlprof.parse.kineto_events import MAX_STRING_CHARS
from mlprof.parse.ascend_common import (
    COMM_SUBTASKS, MEMCPY_TASKS, NPU_DEVICE_TYPE, AscendInput, AscendRows, shapes_json, torch_dtype,
    us_text_to_ns)
from mlprof.tables.names import collective_kind

__all__ = ["read_ascend_text", "read_csv_rows"]

_HOST_CATEGORIES = {"cpu_op", "python_function", "user_annotation", "enqueue", "dequeue"}
_MB = 1024 * 1024


class _Args(msgspec.Struct, gc=False):
    connection_id: Union[int, str, None] = None
    correlation_id: Union[int, str, None] = None
    task_type: Union[str, None] = msgspec.field(default=None, name="Task Type")
    stream: Union[int, str, None] = msgspec.field(default=None, name="Physic Stream Id")
    task_id: Union[int, str, None] = msgspec.field(default=None, name="Task Id")
    sequence_number: Union[int, None] = msgspec.field(default=None, name="Sequence number")
    fwd_thread_id: Union[int, None] = msgspec.field(default=None, name="Fwd thread id")
    input_dims: Union[str, None] = msgspec.field(default=None, name="Input Dims")
    input_types: Union[str, None] = msgspec.field(default=None, name="Input type")
    level: Union[str, None] = None
    data_type: Union[str, None] = None
    count: Union[int, float, None] = None
    src_rank: Union[int, None] = msgspec.field(default=None, name="src rank")
    dst_rank: Union[int, None] = msgspec.field(default=None, name="dst rank")
    name: Union[str, None] = None
    labels: Union[str, None] = None
    sort_index: Union[int, None] = None


class _Event(msgspec.Struct, gc=False):
    # As for Kineto traces: an event without a phase is refused at decode, and so is a name or
    # category past 1 MiB (MAX_STRING_CHARS) of any event, kept or not.
    ph: str
    name: Annotated[str, msgspec.Meta(max_length=MAX_STRING_CHARS)] = ""
    cat: Union[Annotated[str, msgspec.Meta(max_length=MAX_STRING_CHARS)], None] = None
    pid: Union[int, str] = 0
    tid: Union[int, str] = 0
    ts: Union[str, float, int, None] = None
    dur: Union[float, int, str, None] = None
    id: Union[int, str, None] = None
    args: msgspec.Raw = msgspec.Raw()


_EVENTS = msgspec.json.Decoder(Union[list[_Event], dict[str, msgspec.Raw]])
_TRACE_EVENTS = msgspec.json.Decoder(list[_Event])
_ARGS = msgspec.json.Decoder(_Args)
_RAW_ARGS = msgspec.json.Decoder(dict)


def _int(value) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def read_csv_rows(path: Path, required: bool = True) -> list[dict[str, str]]:
    """Rows of one of the tool's CSV files as dicts; a truncated or ragged file is an error naming it."""
    if not path.is_file():
        if required:
            raise CaptureError(f"{path}: missing (torch_npu writes it with every text export)")
        return []
    try:
        with open(path, newline="", encoding="utf-8-sig") as fh:
            reader = csv.reader(fh)
            header = next(reader, None)
            if not header:
                raise TraceFormatError(f"{path}: empty CSV, no header")
            rows = []
            for n, row in enumerate(reader, start=2):
                if not row:
                    continue
                if len(row) != len(header):
                    raise TraceFormatError(f"{path}: line {n} has {len(row)} fields, the header {len(header)} "
                                           f"(truncated or corrupt CSV)")
                rows.append(dict(zip(header, row)))
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise TraceFormatError(f"{path}: unreadable CSV ({exc})") from None
    return rows


def _read_events(path: Path) -> list[_Event]:
    try:
        doc = _EVENTS.decode(path.read_bytes())
    except OSError as exc:
        raise CaptureError(f"{path}: cannot read ({exc.strerror or exc})") from None
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        msg = str(exc)
        raise TraceFormatError(f"{path}: not a valid trace_view.json: "
                               f"{'truncated JSON' if 'truncated' in msg.lower() else msg}") from None
    if isinstance(doc, dict):  # {"traceEvents": [...]} is accepted too
        try:
            return _TRACE_EVENTS.decode(doc.get("traceEvents", msgspec.Raw(b"[]")))
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise TraceFormatError(f"{path}: not a valid trace_view.json: {exc}") from None
    return doc


class _Trace:
    """What trace_view.json contributes, sorted by kind."""

    def __init__(self) -> None:
        self.python_pid = 0
        self.tasks: dict[tuple[int, int], list[tuple[int, int, str, object]]] = defaultdict(list)
        self.comm_ops: dict[str, tuple[int, int, _Args]] = {}
        self.comm_streams: dict[int, int] = {}  # connection id -> stream of its hardware tasks
        self.comm_ranks: set[int] = set()
        self.launch_at: dict[tuple[int, int, int], tuple[int, int]] = {}  # (device pid, tid, ts) -> (host tid, ts)
        self.names: dict[int, str] = {}  # pid -> process name
        self.by_name: dict[str, list] | None = None  # hardware tasks by name, built when first needed

    def pid_of(self, process: str) -> int | None:
        return next((p for p, n in self.names.items() if n == process), None)


def _args_of(e: _Event, path: Path) -> _Args:
    if not len(e.args):
        return _Args()
    try:
        return _ARGS.decode(e.args)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise TraceFormatError(f"{path}: event {e.name!r} at ts {e.ts}: bad args ({exc})") from None


def _read_trace(path: Path, rows: AscendRows) -> _Trace:
    events = _read_events(path)
    rows.event_count = len(events)
    tr = _Trace()
    names = tr.names
    threads: dict[tuple[int, int], str] = {}
    for e in events:
        if e.ph == "M":
            a = _args_of(e, path)
            value = a.name if a.name is not None else a.labels if a.labels is not None else a.sort_index
            pid, tid = _int(e.pid), _int(e.tid)
            if e.name == "process_name" and isinstance(value, str):
                names[pid] = value
            if e.name == "thread_name" and isinstance(value, str):
                threads[(pid, tid)] = value
            rows.threads.append((pid, None if e.name.startswith("process") else tid, e.name, str(value)))
    # The framework's process is named "Python" (CANN is labelled CPU too).
    py = tr.python_pid = tr.pid_of("Python") or 0
    flow_starts: dict[int, tuple[int, int]] = {}
    flow_ends: list[tuple[int, int, int, int]] = []
    for index, e in enumerate(events):
        ph = e.ph
        if ph == "M":
            continue
        pid = e.pid if type(e.pid) is int else _int(e.pid)
        tid = e.tid if type(e.tid) is int else _int(e.tid)
        ts = us_text_to_ns(e.ts, path, "ts")
        if ts is None:  # not read as 0 (a 55-year span): every event but metadata needs its time
            raise TraceFormatError(f"{path}: $[{index}].ts: missing (every event but metadata ('M') needs a time)")
        if ph == "X":
            dur = us_text_to_ns(e.dur, path, "dur")
            if dur is None:
                raise TraceFormatError(f"{path}: $[{index}].dur: missing (a complete 'X' event needs a duration)")
            proc = names.get(pid, "")
            if pid == py:
                a = _args_of(e, path)
                rows.host.row(e.name, e.cat or "cpu_op", pid, tid, ts, dur, _int(a.correlation_id),
                              a.sequence_number, a.fwd_thread_id, shapes_json(a.input_dims, True),
                              shapes_json(a.input_types, False))
            elif proc == "CANN":
                a = _args_of(e, path)
                rows.runtime.add(name=e.name, category=f"cann_{a.level or 'api'}", pid=py, tid=tid, start_ns=ts,
                                 dur_ns=dur, correlation=_int(a.connection_id))
            elif proc == "Ascend Hardware":
                a = _args_of(e, path)
                conn = _int(a.connection_id)
                tr.tasks[(_int(a.stream) if a.stream is not None else tid, _int(a.task_id))].append(
                    (ts, dur, a.task_type or "", conn, e.name, tid))
                if a.task_type in COMM_SUBTASKS and conn is not None:
                    tr.comm_streams.setdefault(conn, tid)
            elif proc == "HCCL" and threads.get((pid, tid), "").endswith("Communication"):
                tr.comm_ops[e.name] = (ts, dur, _args_of(e, path))
            elif proc == "HCCL":
                a = _args_of(e, path)
                tr.comm_ranks.update(r for r in (a.src_rank, a.dst_rank) if r is not None and r < 2**31)
                rows.unknown[("X", "hccl_plane_task")] += 1
            else:
                rows.unknown[("X", proc or str(pid))] += 1
        elif ph == "C":
            args = _RAW_ARGS.decode(e.args) if len(e.args) else {}
            for key, value in args.items():
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    rows.counters.row(e.name, key, pid, ts, value)
        elif ph in ("s", "f"):
            fid = _int(e.id)
            if fid is not None and not -2**63 < fid < 2**63:  # ids are opaque: fold into int64
                fid = fid % 2**63
            rows.flows.row(0 if ph == "s" else 2, e.cat, fid, pid, tid, ts)
            if e.cat == "async_npu":
                if ph == "s":
                    flow_starts[fid] = (tid, ts)
                else:
                    flow_ends.append((fid, pid, tid, ts))
        else:
            rows.unknown[(ph, e.cat or "")] += 1
    for fid, pid, tid, ts in flow_ends:
        if fid in flow_starts:
            tr.launch_at[(pid, tid, ts)] = flow_starts[fid]
    return tr


def _match_task(tr: _Trace, stream: int | None, task_id: int | None, start: int, name: str):
    """The Ascend Hardware task of a kernel_details row: by stream and task id, else
    (level0 writes neither) the task of that name starting at the same time (1 us slack)."""
    cands = tr.tasks.get((stream, task_id)) if task_id is not None else None
    if not cands:
        if tr.by_name is None:
            tr.by_name = defaultdict(list)
            for tasks in tr.tasks.values():
                for t in tasks:
                    tr.by_name[t[4]].append(t)
        cands = tr.by_name.get(name)
    if not cands:
        return None
    best = min(cands, key=lambda c: abs(c[0] - start))
    return best if abs(best[0] - start) <= 1_000 else None


_KNOWN_KD = {"Step Id", "Model ID", "Task ID", "Stream ID", "Name", "Type", "OP State", "Accelerator Core",
             "Start Time(us)", "Duration(us)", "Wait Time(us)", "Block Dim", "Mix Block Dim", "HF32 Eligible",
             "Input Shapes", "Input Data Types", "Input Formats", "Output Shapes", "Output Data Types",
             "Output Formats", "Context ID", "Device_id"}


def _na(value: str | None) -> str | None:
    value = (value or "").strip().strip('"')
    return None if value in ("", "N/A") else value


def _add_kernels(path: Path, tr: _Trace, rows: AscendRows, device: int, groups: dict[str, str]) -> set:
    used = set()
    hw_pid, hccl_pid = tr.pid_of("Ascend Hardware"), tr.pid_of("HCCL")
    for r in read_csv_rows(path):
        name = r.get("Name", "")
        start = us_text_to_ns(r.get("Start Time(us)"), path, "Start Time(us)")
        dur = us_text_to_ns(r.get("Duration(us)"), path, "Duration(us)") or 0
        core = _na(r.get("Accelerator Core"))
        op_type = _na(r.get("Type"))
        is_comm = core == "HCCL" or name.startswith("hcom_") or (op_type or "").startswith("hcom_")
        stream, task_id = _int(r.get("Stream ID")), _int(r.get("Task ID"))
        conn = task_type = launch = None
        if is_comm and name in tr.comm_ops:
            c_ts, _, a = tr.comm_ops[name]
            conn = _int(a.connection_id)
            stream = tr.comm_streams.get(conn, stream)
            launch = tr.launch_at.get((hccl_pid, 0, c_ts))
            task_type = "HCCL"
        else:
            task = _match_task(tr, stream, task_id, start, name)
            if task is not None:
                used.add(task)
                conn, task_type, stream = task[3], task[2], task[5] if stream is None else stream
                launch = tr.launch_at.get((hw_pid, task[5], task[0]))
        row = len(rows.device)
        rows.device.add(name=name, kind="kernel", device=device, stream=stream, start_ns=start, dur_ns=dur,
                        correlation=conn, is_communication=is_comm,
                        launch_tid=launch[0] if launch else None, launch_ns=launch[1] if launch else None)
        rows.details.add(device_row=row, task_type=task_type, accelerator_core=core, op_type=op_type,
                         op_state=_na(r.get("OP State")), task_id=task_id, context_id=_int(r.get("Context ID")),
                         block_dim=_int(r.get("Block Dim")), mix_block_dim=_int(r.get("Mix Block Dim")),
                         wait_ns=us_text_to_ns(_na(r.get("Wait Time(us)")), path, "Wait Time(us)"),
                         input_shapes=_na(r.get("Input Shapes")), input_dtypes=_na(r.get("Input Data Types")),
                         input_formats=_na(r.get("Input Formats")), output_shapes=_na(r.get("Output Shapes")),
                         output_dtypes=_na(r.get("Output Data Types")),
                         output_formats=_na(r.get("Output Formats")), source="kernel_details.csv")
        for key, value in r.items():
            if key not in _KNOWN_KD and _na(value) is not None:
                try:
                    rows.metrics.add(device_row=row, metric=key, value=float(value))
                except ValueError:
                    pass
        if is_comm:
            a = tr.comm_ops[name][2] if name in tr.comm_ops else None
            count = _int(a.count) if a is not None else None
            rows.collectives.add(device_row=row, collective_name=collective_kind(name),
                                 group_name=groups.get(name), dtype=torch_dtype(a.data_type if a else None),
                                 in_nelems=count, out_nelems=count,
                                 group_size=len(tr.comm_ranks) if tr.comm_ranks else None)
    return used


def _add_memcpy_tasks(tr: _Trace, rows: AscendRows, device: int, used: set) -> None:
    hw_pid = tr.pid_of("Ascend Hardware")
    for (stream, task_id), cands in tr.tasks.items():
        for task in cands:
            if task in used:
                continue
            ts, dur, task_type, conn, name, tid = task
            if task_type in MEMCPY_TASKS:
                launch = tr.launch_at.get((hw_pid, tid, ts))
                row = len(rows.device)
                rows.device.add(name=name, kind="memcpy", device=device, stream=stream, start_ns=ts, dur_ns=dur,
                                correlation=conn, is_communication=False,
                                launch_tid=launch[0] if launch else None, launch_ns=launch[1] if launch else None)
                rows.details.add(device_row=row, task_type=task_type, task_id=task_id, source="trace_view.json")
            else:
                rows.unknown[("X", f"ascend_task:{task_type}")] += 1


def _optional_json(path: Path):
    """The JSON document at ``path``, or {} when there is none; unreadable JSON is a TraceFormatError."""
    if not path.is_file():
        return {}
    try:
        return json.loads(path.read_bytes())
    except (OSError, ValueError) as exc:
        raise TraceFormatError(f"{path}: unreadable JSON ({exc})") from None


def _group_ranks(path: Path) -> dict[str, str]:
    """Communication group -> its ranks as JSON text, from communication_matrix.json's "src-dst" link keys
    under each "op@group" (torch_npu writes no rank list; without one the cluster matrix was empty)."""
    doc = _optional_json(path)
    ranks: dict[str, set[int]] = defaultdict(set)
    for step in doc.values() if isinstance(doc, dict) else ():
        for kind in step.values() if isinstance(step, dict) else ():
            for key, links in kind.items() if isinstance(kind, dict) else ():
                group = key.partition("@")[2]
                for link in links if group and isinstance(links, dict) else ():
                    src, _, dst = str(link).partition("-")
                    if src.isdigit() and dst.isdigit():
                        ranks[group].update((int(src), int(dst)))
    return {group: json.dumps(sorted(r)) for group, r in ranks.items() if len(r) > 1}


def _comm_groups(path: Path) -> dict[str, str]:
    """Op name -> communication group, from communication.json's "name@group" keys."""
    doc = _optional_json(path)
    groups = {}
    for step in doc.values() if isinstance(doc, dict) else ():
        for kind in step.values() if isinstance(step, dict) else ():
            for key in kind if isinstance(kind, dict) else ():
                name, _, group = key.partition("@")
                groups[name] = group or None
    return groups


def _device_of(out: Path, fallback: int) -> int:
    for r in read_csv_rows(out / "memory_record.csv", required=False)[:50]:
        dev = r.get("Device Type", "")
        if dev.startswith("NPU:") and dev[4:].isdigit():
            return int(dev[4:])
    return fallback


def _add_memory(out: Path, rows: AscendRows, pid: int) -> None:
    path = out / "operator_memory.csv"
    for r in read_csv_rows(path, required=False):
        size = round(float(r.get("Size(KB)") or 0) * 1024)
        dev = r.get("Device Type", "")
        dev_id = int(dev[4:]) if dev.startswith("NPU:") and dev[4:].isdigit() else -1
        for ts_key, sign, alloc_key, res_key in (
                ("Allocation Time(us)", 1, "Allocation Total Allocated(MB)", "Allocation Total Reserved(MB)"),
                ("Release Time(us)", -1, "Release Total Allocated(MB)", "Release Total Reserved(MB)")):
            ts = us_text_to_ns(r.get(ts_key), path, ts_key)
            if ts is None:
                continue
            alloc, res = _na(r.get(alloc_key)), _na(r.get(res_key))
            if not (r.get("Stream Ptr") or "").strip():
                alloc = res = None  # the GE pool (ascend_common.ge_pool_totals)
            rows.memory.add(ts_ns=ts, pid=pid, tid=None, device_type=NPU_DEVICE_TYPE, device_id=dev_id,
                            size_bytes=sign * size, total_allocated_bytes=round(float(alloc) * _MB) if alloc else None,
                            total_reserved_bytes=round(float(res) * _MB) if res else None)
            rows.memory_ops.append(r.get("Name") if sign > 0 else None)
    path = out / "memory_record.csv"
    for r in read_csv_rows(path, required=False):
        ts = us_text_to_ns(r.get("Timestamp(us)"), path, "Timestamp(us)")
        for key, series in (("Total Allocated(MB)", "allocated_bytes"), ("Total Reserved(MB)", "reserved_bytes"),
                            ("Total Active(MB)", "active_bytes")):
            value = _na(r.get(key))
            if value is not None and ts is not None:
                rows.counters.add(name=f"npu_memory:{r.get('Component', '')}", series=series, pid=pid, ts_ns=ts,
                                  value=float(value) * _MB)


def read_ascend_text(inp: AscendInput) -> AscendRows:
    """One rank's text export as :class:`AscendRows`."""
    out = inp.profiler_output
    rows = AscendRows()
    tr = _read_trace(out / "trace_view.json", rows)
    device = _device_of(out, inp.rank if inp.rank is not None else 0)
    groups = _comm_groups(out / "communication.json")
    rows.group_ranks = _group_ranks(out / "communication_matrix.json")
    used = _add_kernels(out / "kernel_details.csv", tr, rows, device, groups)
    _add_memcpy_tasks(tr, rows, device, used)
    _add_memory(out, rows, tr.python_pid)
    rows.metadata["ascend.device"] = device
    rows.metadata["ascend.python_pid"] = tr.python_pid
    return rows
