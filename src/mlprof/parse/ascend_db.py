"""Parser of torch_npu's SQLite export (``ASCEND_PROFILER_OUTPUT/ascend_pytorch_profiler_N.db``).

The db holds the same facts as the text export, already in ns and with
strings interned in ``STRING_IDS``: ``PYTORCH_API`` (host ops, Python
functions, task-queue ops), ``CANN_API`` (runtime calls), ``TASK`` with
``COMPUTE_TASK_INFO``/``TASK_PMU_INFO`` (device tasks and their counters),
``COMMUNICATION_OP`` (collectives), ``OP_MEMORY``/``MEMORY_RECORD`` (memory)
and ``META_DATA``/``NPU_INFO``/``RANK_DEVICE_MAP``/``HOST_INFO`` (metadata).
Rows go into the same :class:`AscendRows` as the text parser's.
"""

from __future__ import annotations

import json
import sqlite3
from collections import defaultdict

from mlprof.errors import TraceFormatError
from mlprof.parse.ascend_common import (
    COMM_SUBTASKS, MEMCPY_TASKS, NPU_DEVICE_TYPE, AscendInput, AscendRows, shapes_json, torch_dtype)
from mlprof.parse.sqlite_input import open_read_only
from mlprof.tables.names import collective_kind

__all__ = ["read_ascend_db"]

# PYTORCH_API.type (ENUM_API_TYPE): op, queue, trace (Python function).
_HOST_TYPES = {50001: "cpu_op", 50002: "queue", 50003: "python_function"}
_NEEDED = ("STRING_IDS", "PYTORCH_API", "TASK")


class _Times:
    """Reads a table's times: integer ns, or their text (PYTORCH_API keeps startNs as TEXT); anything
    else (NULL, 'abc', a float) refuses the db naming the table and column, never read as 0."""

    def __init__(self, path) -> None:
        self.path = path

    def ns(self, value, table: str, column: str) -> int:
        if type(value) is int:
            return value
        if isinstance(value, str):
            text = value.strip()
            if text.lstrip("-").isdigit() and len(text) <= 20:
                number = int(text)
                if -2**63 <= number < 2**63:
                    return number
        shown = "NULL" if value is None else repr(str(value)[:40])
        raise TraceFormatError(f"{self.path}: {table}.{column} {shown} is not a time in integer ns")

    def span(self, start, end, table: str) -> tuple[int, int]:
        """(start ns, duration ns) of a row."""
        start = self.ns(start, table, "startNs")
        return start, self.ns(end, table, "endNs") - start


def _split_tid(global_tid: int | None) -> tuple[int | None, int | None]:
    if global_tid is None:
        return None, None
    return global_tid >> 32, global_tid & 0xFFFFFFFF


def _tables(con: sqlite3.Connection) -> set[str]:
    return {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def _select(con: sqlite3.Connection, table: str, columns: str, tail: str = "") -> sqlite3.Cursor:
    """SELECT ``columns`` (comma-separated) FROM ``table``; a column this db version lacks reads as NULL."""
    have = {r[1] for r in con.execute(f'PRAGMA table_info("{table}")')}
    cols = [c.strip() for c in columns.split(",")]
    listed = ", ".join(c if c in have else "NULL" for c in cols)
    return con.execute(f'SELECT {listed} FROM "{table}" {tail}')


def _host(con, s, rows: AscendRows, t: _Times) -> tuple[int, dict[int, tuple[int, int]]]:
    """Host ops; returns the Python pid and connection id -> (tid, start) of the op that launched it."""
    conn_ids: dict[int, list[int]] = defaultdict(list)
    for cid, conn in _select(con, "CONNECTION_IDS", "id, connectionId") \
            if "CONNECTION_IDS" in _tables(con) else ():
        conn_ids[cid].append(conn)
    launch: dict[int, tuple[int, int]] = {}
    pid_count: dict[int, int] = defaultdict(int)
    for (start, end, gtid, conn, name, seq, fwd, dtypes, shapes, kind) in _select(
            con, "PYTORCH_API", "startNs, endNs, globalTid, connectionId, name, sequenceNumber, fwdThreadId, "
            "inputDtypes, inputShapes, type", "ORDER BY CAST(startNs AS INTEGER)"):
        pid, tid = _split_tid(gtid)
        start, dur = t.span(start, end, "PYTORCH_API")
        text = s.get(name, "")
        category = _HOST_TYPES.get(kind, "cpu_op")
        if category == "queue":
            category = "enqueue" if text.startswith("Enqueue") else "dequeue"
        # Enqueue/Dequeue pairs share their first connection id (the task queue's correlation).
        queue_id = conn_ids[conn][0] if category != "cpu_op" and conn_ids.get(conn) else None
        rows.host.add(name=text, category=category, pid=pid, tid=tid, start_ns=start, dur_ns=dur,
                      external_id=queue_id, sequence_number=seq, fwd_thread_id=fwd,
                      input_dims=shapes_json(s.get(shapes), True), input_types=shapes_json(s.get(dtypes), False))
        pid_count[pid] += 1
        if kind == 50001 and conn is not None:
            for c in conn_ids.get(conn, ()):
                launch.setdefault(c, (tid, start))
    return max(pid_count, key=pid_count.get) if pid_count else 0, launch


def _runtime(con, s, rows: AscendRows, py: int, t: _Times) -> None:
    types = dict(_select(con, "ENUM_API_TYPE", "id, name")) if "ENUM_API_TYPE" in _tables(con) else {}
    for start, end, kind, gtid, conn, name in _select(
            con, "CANN_API", "startNs, endNs, type, globalTid, connectionId, name", "ORDER BY startNs"):
        _, tid = _split_tid(gtid)
        start, dur = t.span(start, end, "CANN_API")
        level = types.get(kind, "api")
        prefix = {"acl": "AscendCL", "node": "Node", "runtime": "Runtime", "hccl": "HCCL", "model": "Model"}
        rows.runtime.add(name=f"{prefix.get(level, level)}@{s.get(name, '')}", category=f"cann_{level}", pid=py,
                         tid=tid, start_ns=start, dur_ns=dur, correlation=conn)


def _device(con, s, rows: AscendRows, launch: dict, device_fallback: int, t: _Times) -> None:
    have = _tables(con)
    pmu: dict[int, list[tuple[str, float]]] = defaultdict(list)
    if "TASK_PMU_INFO" in have:
        for gid, name, value in _select(con, "TASK_PMU_INFO", "globalTaskId, name, value"):
            pmu[gid].append((s.get(name, str(name)), value))
    compute = {r[0]: r[1:] for r in _select(
        con, "COMPUTE_TASK_INFO", "globalTaskId, name, opType, taskType, blockDim, mixBlockDim, inputShapes, "
        "inputDataTypes, inputFormats, outputShapes, outputDataTypes, outputFormats, waitNs")} \
        if "COMPUTE_TASK_INFO" in have else {}
    comm_stream: dict[int, int] = {}
    for start, end, dev, conn, gid, ttype, ctx, stream, task_id in _select(
            con, "TASK", "startNs, endNs, deviceId, connectionId, globalTaskId, taskType, contextId, streamId, taskId",
            "ORDER BY startNs"):
        task_type = s.get(ttype, "")
        start, dur = t.span(start, end, "TASK")
        info = compute.get(gid)
        dev = dev if dev is not None else device_fallback
        if info is None and task_type not in MEMCPY_TASKS:
            if task_type in COMM_SUBTASKS:
                comm_stream.setdefault(conn, stream)
            rows.unknown[("task", f"ascend_task:{task_type}")] += 1
            continue
        at = launch.get(conn)
        row = len(rows.device)
        name = s.get(info[0], "") if info else task_type
        rows.device.add(name=name, kind="kernel" if info else "memcpy", device=dev, stream=stream, start_ns=start,
                        dur_ns=dur, correlation=conn, is_communication=False,
                        launch_tid=at[0] if at else None, launch_ns=at[1] if at else None)
        if info:
            (_, op_type, core, block, mix, ish, idt, ifm, osh, odt, ofm, wait) = info
            rows.details.add(device_row=row, task_type=task_type, accelerator_core=s.get(core), op_type=s.get(op_type),
                             task_id=task_id, context_id=ctx if ctx != 4294967295 else None, block_dim=block,
                             mix_block_dim=mix, wait_ns=wait, input_shapes=s.get(ish), input_dtypes=s.get(idt),
                             input_formats=s.get(ifm), output_shapes=s.get(osh), output_dtypes=s.get(odt),
                             output_formats=s.get(ofm), source="TASK+COMPUTE_TASK_INFO")
            for metric, value in pmu.get(gid, ()):
                rows.metrics.add(device_row=row, metric=metric, value=value)
        else:
            rows.details.add(device_row=row, task_type=task_type, task_id=task_id, source="TASK")
    if "COMMUNICATION_OP" not in have:
        return
    dtypes = dict(_select(con, "ENUM_HCCL_DATA_TYPE", "id, name")) if "ENUM_HCCL_DATA_TYPE" in have else {}
    ranks = {r for pair in _select(con, "COMMUNICATION_TASK_INFO", "srcRank, dstRank") for r in pair
             if r is not None and r < 2**31} if "COMMUNICATION_TASK_INFO" in have else set()
    for name, start, end, conn, group, dtype, count, op_type, wait in _select(
            con, "COMMUNICATION_OP", "opName, startNs, endNs, connectionId, groupName, dataType, count, opType, waitNs",
            "ORDER BY startNs"):
        start, dur = t.span(start, end, "COMMUNICATION_OP")
        at = launch.get(conn)
        row = len(rows.device)
        text = s.get(name, "")
        rows.device.add(name=text, kind="kernel", device=device_fallback, stream=comm_stream.get(conn),
                        start_ns=start, dur_ns=dur, correlation=conn, is_communication=True,
                        launch_tid=at[0] if at else None, launch_ns=at[1] if at else None)
        rows.details.add(device_row=row, task_type="HCCL", accelerator_core="HCCL", op_type=s.get(op_type),
                         wait_ns=wait, source="COMMUNICATION_OP")
        n = int(count) if count is not None else None
        rows.collectives.add(device_row=row, collective_name=collective_kind(text), group_name=s.get(group),
                             dtype=torch_dtype(dtypes.get(dtype)), in_nelems=n, out_nelems=n,
                             group_size=len(ranks) or None)


def _memory(con, s, rows: AscendRows, py: int, t: _Times) -> None:
    have = _tables(con)
    if "OP_MEMORY" in have:
        for name, size, alloc_t, rel_t, a_alloc, a_res, r_alloc, r_res, dev, stream in _select(
                con, "OP_MEMORY", "name, size, allocationTime, releaseTime, allocationTotalAllocated, "
                "allocationTotalReserved, releaseTotalAllocated, releaseTotalReserved, deviceId, streamPtr"):
            if stream is None:  # the GE pool (ascend_common.ge_pool_totals)
                a_alloc = a_res = r_alloc = r_res = None
            for ts, sign, alloc, res in ((alloc_t, 1, a_alloc, a_res), (rel_t, -1, r_alloc, r_res)):
                if ts is not None:
                    ts = t.ns(ts, "OP_MEMORY", "allocationTime" if sign > 0 else "releaseTime")
                    rows.memory.add(ts_ns=ts, pid=py, device_type=NPU_DEVICE_TYPE,
                                    device_id=dev if dev is not None else -1, size_bytes=sign * size,
                                    total_allocated_bytes=alloc, total_reserved_bytes=res)
                    rows.memory_ops.append(s.get(name) if sign > 0 else None)
    if "MEMORY_RECORD" in have:
        for comp, ts, alloc, res, active in _select(
                con, "MEMORY_RECORD", "component, timestamp, totalAllocated, totalReserved, totalActive"):
            for series, value in (("allocated_bytes", alloc), ("reserved_bytes", res), ("active_bytes", active)):
                if value is not None:
                    rows.counters.add(name=f"npu_memory:{s.get(comp, '')}", series=series, pid=py,
                                      ts_ns=None if ts is None else t.ns(ts, "MEMORY_RECORD", "timestamp"),
                                      value=value)


def _metadata(con, rows: AscendRows) -> int | None:
    have = _tables(con)
    device = None
    if "META_DATA" in have:
        for key, value in _select(con, "META_DATA", "name, value"):
            key = "profiler_metadata.environment" if key == "ENV_VARIABLES" else f"ascend.db.{key}"
            try:
                rows.metadata[key] = json.loads(value)
            except (TypeError, ValueError):
                rows.metadata[key] = value
    if "NPU_INFO" in have:
        info = _select(con, "NPU_INFO", "id, name").fetchall()
        if info:
            device = info[0][0]
            rows.metadata["deviceProperties"] = [{"id": i, "name": n} for i, n in info]
    if "RANK_DEVICE_MAP" in have:
        pairs = _select(con, "RANK_DEVICE_MAP", "rankId, deviceId").fetchall()
        if pairs:
            device = pairs[0][1]
    if "HOST_INFO" in have:
        host = _select(con, "HOST_INFO", "hostName").fetchall()
        if host:
            rows.metadata["ascend.host_name"] = host[0][0]
    return device


def _strings(con) -> dict[int, str]:
    """STRING_IDS as id -> text; a NULL value reads as an id without its string (absent, as an unknown id),
    a number or blob as its text."""
    out = {}
    for sid, value in _select(con, "STRING_IDS", "id, value"):
        if value is None:
            continue
        out[sid] = value if isinstance(value, str) else (
            value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value))
    return out


def read_ascend_db(inp: AscendInput) -> AscendRows:
    """One rank's SQLite export as :class:`AscendRows`."""
    path = inp.db_path
    try:
        con = open_read_only(path)
    except (sqlite3.Error, OSError) as exc:
        raise TraceFormatError(f"{path}: cannot open as SQLite ({exc})") from None
    try:
        missing = [t for t in _NEEDED if t not in _tables(con)]
        if missing:
            raise TraceFormatError(f"{path}: not a torch_npu profiler db (no {', '.join(missing)} table)")
        s = _strings(con)
        t = _Times(path)
        rows = AscendRows()
        device = _metadata(con, rows)
        if device is None:
            device = inp.rank if inp.rank is not None else 0
        py, launch = _host(con, s, rows, t)
        if "CANN_API" in _tables(con):
            _runtime(con, s, rows, py, t)
        _device(con, s, rows, launch, device, t)
        _memory(con, s, rows, py, t)
        rows.event_count = len(rows.host) + len(rows.runtime) + len(rows.device)
        rows.metadata["ascend.device"] = device
        rows.metadata["ascend.python_pid"] = py
        rows.group_ranks = _group_ranks(path.parent / "analysis.db")
        return rows
    finally:
        con.close()


def _group_ranks(path) -> dict[str, str]:
    """Communication group -> its ranks as JSON text, from analysis.db's CommAnalyzerMatrix links (the
    SQLite twin of communication_matrix.json); {} without it."""
    if not path.is_file():
        return {}
    try:
        con = open_read_only(path)
    except (sqlite3.Error, OSError) as exc:
        raise TraceFormatError(f"{path}: cannot open as SQLite ({exc})") from None
    try:
        if "CommAnalyzerMatrix" not in _tables(con):
            return {}
        ranks: dict[str, set[int]] = {}
        for group, src, dst in con.execute("SELECT group_name, src_rank, dst_rank FROM CommAnalyzerMatrix"):
            if group is not None and str(src).isdigit() and str(dst).isdigit():
                ranks.setdefault(str(group), set()).update((int(src), int(dst)))
    except sqlite3.Error as exc:
        raise TraceFormatError(f"{path}: CommAnalyzerMatrix: {exc}") from None
    finally:
        con.close()
    return {group: json.dumps(sorted(r)) for group, r in ranks.items() if len(r) > 1}
