"""Presenter of ``trace_view.json``: one merged Chrome trace of everything parsed.

Events are rendered to JSON inside DuckDB (``to_json``) and streamed to the
file in batches, so a million-event trace never becomes a million Python
dicts. Times are µs (float, ns precision) after ``baseTimeNanoseconds``;
flow ids are renumbered from 1, so they stay far below 2^53.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from mlprof.capture.files import publish_file
from mlprof.export.options import TRACE_VIEW_FILE
from mlprof.capture.trace_names import GC_NAME_SQL, STEP_NAME_SQL
from mlprof.tables.store import TableStore

__all__ = ["write_trace_view", "MLPROF_PID", "TRACE_VIEW_FILE"]


# A pseudo-process holding mlprof's own tracks (steps, markers, GC, memory).
MLPROF_PID = 2_000_000_000
_TRACKS = {1: "Steps", 2: "Markers", 3: "GC", 4: "Memory"}
_BATCH = 50_000
# Flow categories of kernel launches (Kineto's ac2g; older torch wrote async,
# async_cpu_to_gpu): drawn once, from runtime_calls -> device_ops, never again.
_LAUNCH_FLOWS = "'ac2g', 'async', 'async_cpu_to_gpu'"
_INSTANT = "(end_ns IS NULL OR kind = 'mark' OR kind = 'instant')"


def _base_ns(store: TableStore) -> int:
    lo = store.rows("""SELECT min(t) FROM (
        SELECT min(start_ns) AS t FROM host_ops UNION ALL SELECT min(start_ns) FROM device_ops
        UNION ALL SELECT min(start_ns) FROM steps UNION ALL SELECT min(start_ns) FROM markers
        UNION ALL SELECT min(start_ns) FROM runtime_calls UNION ALL SELECT min(start_ns) FROM gc_pauses
        UNION ALL SELECT min(ts_ns) FROM counters UNION ALL SELECT min(ts_ns) FROM scalars)""")[0][0]
    return 0 if lo is None else (lo // 1_000_000_000) * 1_000_000_000


def _queries(base: int, step: int | None) -> list[tuple[str, list]]:
    ts = f"((%s - {base}) / 1000.0)"
    st = "" if step is None else " AND step = ?"
    p = [] if step is None else [step]
    return [
        (f"""SELECT to_json({{ph: 'X', cat: category, name: name, pid: pid, tid: tid,
               ts: {ts % 'start_ns'}, dur: dur_ns / 1000.0,
               args: {{"External id": external_id, "Sequence number": sequence_number,
                       "Input Dims": input_dims::JSON, "Input type": input_types::JSON,
                       "Self(us)": self_ns / 1000.0}}}})
            FROM host_ops WHERE pid IS NOT NULL{st}""", p),
        (f"""SELECT to_json({{ph: 'X', cat: category, name: name, pid: pid, tid: tid,
               ts: {ts % 'start_ns'}, dur: dur_ns / 1000.0,
               args: {{correlation: correlation, "External id": external_id}}}})
            FROM runtime_calls WHERE pid IS NOT NULL{st}""", p),
        (f"""SELECT to_json({{ph: 'X', cat: kind, name: name, pid: coalesce(device, 0), tid: coalesce(stream, 0),
               ts: {ts % 'start_ns'}, dur: dur_ns / 1000.0,
               args: {{correlation: correlation, device: device, stream: stream, grid: grid::JSON,
                       block: block::JSON, bytes: size_bytes}}}})
            FROM device_ops WHERE true{st}""", p),
        # Host -> device flow arrows: launch (runtime call) to the device op.
        (f"""WITH pairs AS (
                SELECT row_number() OVER (ORDER BY d.start_ns, d.device_op_id, r.call_id) AS fid, r.pid AS rpid,
                       r.tid AS rtid, r.start_ns AS rts, coalesce(d.device, 0) AS dpid,
                       coalesce(d.stream, 0) AS dtid, d.start_ns AS dts
                FROM device_ops d JOIN runtime_calls r
                  ON r.window_index = d.window_index AND r.correlation = d.correlation
                WHERE r.pid IS NOT NULL{st.replace('step', 'd.step')})
            SELECT to_json({{ph: 's', id: fid, cat: 'ac2g', name: 'ac2g', pid: rpid, tid: rtid,
                             ts: {ts % 'rts'}}}) FROM pairs
            UNION ALL
            SELECT to_json({{ph: 'f', id: fid, bp: 'e', cat: 'ac2g', name: 'ac2g', pid: dpid, tid: dtid,
                             ts: {ts % 'dts'}}}) FROM pairs""", p),
        (f"""WITH pairs AS (
                SELECT 1000000000000 + row_number() OVER (ORDER BY start_ns, end_ns, category, start_pid, start_tid,
                                                                end_pid, end_tid, flow_id) AS fid, *
                FROM flows WHERE category NOT IN ({_LAUNCH_FLOWS}) AND start_pid IS NOT NULL
                  AND end_pid IS NOT NULL)
            SELECT to_json({{ph: 's', id: fid, cat: category, name: category, pid: start_pid,
                             tid: start_tid, ts: {ts % 'start_ns'}}}) FROM pairs
            UNION ALL
            SELECT to_json({{ph: 'f', id: fid, bp: 'e', cat: category, name: category, pid: end_pid,
                             tid: end_tid, ts: {ts % 'end_ns'}}}) FROM pairs""", []),
        # Steps from the trace's own ProfilerStep#N events are already on its host track; a second
        # span of the same name would make the file parse to two steps each. Steps only mlprof
        # measured (a capture without Kineto events) get the same name and category on mlprof's track,
        # so the file parses back to the same steps.
        (f"""SELECT to_json({{ph: 'X', cat: 'user_annotation', name: {STEP_NAME_SQL}, pid: {MLPROF_PID}, tid: 1,
               ts: {ts % 'start_ns'}, dur: dur_ns / 1000.0, args: {{step: step, source: source}}}})
            FROM steps WHERE source <> 'kineto'{st}""", p),
        # Instants carry no dur at all (not "dur": null); ranges are complete events.
        (f"""SELECT to_json({{ph: 'i', s: 't', cat: kind, name: name, pid: {MLPROF_PID}, tid: 2,
                             ts: {ts % 'start_ns'}}})
            FROM markers WHERE kind <> 'device_annotation' AND {_INSTANT}""", []),
        (f"""SELECT to_json({{ph: 'X', cat: kind, name: name, pid: {MLPROF_PID}, tid: 2,
                             ts: {ts % 'start_ns'}, dur: (end_ns - start_ns) / 1000.0}})
            FROM markers WHERE kind <> 'device_annotation' AND NOT ({_INSTANT})""", []),
        (f"""SELECT to_json({{ph: 'X', cat: 'gpu_user_annotation', name: name, pid: pid, tid: tid,
               ts: {ts % 'start_ns'}, dur: (end_ns - start_ns) / 1000.0}})
            FROM markers WHERE kind = 'device_annotation' AND pid IS NOT NULL""", []),
        (f"""SELECT to_json({{ph: 'X', cat: 'gc', name: {GC_NAME_SQL}, pid: {MLPROF_PID},
               tid: 3, ts: {ts % 'start_ns'}, dur: dur_ns / 1000.0,
               args: {{collected: collected, uncollectable: uncollectable, thread: tid}}}})
            FROM gc_pauses WHERE true{st}""", p),
        (f"""SELECT to_json({{ph: 'C', name: 'Memory (device ' || coalesce(device_type, -1) || ':' || coalesce(device_id, -1) || ')',
               pid: {MLPROF_PID}, ts: {ts % 'ts_ns'},
               args: {{allocated_bytes: total_allocated_bytes, reserved_bytes: total_reserved_bytes}}}})
            FROM memory_events WHERE total_allocated_bytes IS NOT NULL{st}""", p),
        (f"""SELECT to_json({{ph: 'C', name: name, pid: coalesce(pid, {MLPROF_PID}), ts: {ts % 'ts_ns'},
               args: map_from_entries([(series, value)])}})
            FROM counters""", []),
        # Training scalars: one counter track each (loss, learning_rate, samples_per_second, ...),
        # drawn at the moment they were logged, on mlprof's own process.
        (f"""SELECT to_json({{ph: 'C', cat: 'scalar', name: name, pid: {MLPROF_PID}, ts: {ts % 'ts_ns'},
               args: map_from_entries([(name, value)])}})
            FROM scalars WHERE value IS NOT NULL{st} ORDER BY ts_ns, name, step, source, value""", p),
    ]


def _metadata_events(store: TableStore) -> list[str]:
    out = []
    seen = set()
    for pid, tid, kind, value in store.rows(
            "SELECT DISTINCT pid, tid, kind, value FROM threads WHERE kind IN ('process_name', 'thread_name') "
            "AND pid IS NOT NULL ORDER BY pid, tid NULLS FIRST, kind, value"):
        key = (pid, tid, kind)
        if key in seen:
            continue
        seen.add(key)
        out.append(json.dumps({"ph": "M", "name": kind, "pid": pid, "tid": tid or 0, "args": {"name": value}}))
    for device, in store.rows("SELECT DISTINCT device FROM device_ops WHERE device IS NOT NULL ORDER BY 1"):
        if (device, None, "process_name") not in seen:
            out.append(json.dumps({"ph": "M", "name": "process_name", "pid": device, "tid": 0,
                                   "args": {"name": f"GPU {device}"}}))
    out.append(json.dumps({"ph": "M", "name": "process_name", "pid": MLPROF_PID, "tid": 0,
                           "args": {"name": "mlprof"}}))
    for tid, name in _TRACKS.items():
        out.append(json.dumps({"ph": "M", "name": "thread_name", "pid": MLPROF_PID, "tid": tid,
                               "args": {"name": name}}))
    return out


def write_trace_view(store: TableStore, out_dir: Path, step: int | None = None,
                     file_name: str = TRACE_VIEW_FILE) -> Path:
    """Write the merged timeline; with ``step``, only that step's events."""
    base = _base_ns(store)
    target = out_dir / file_name
    tmp = out_dir / f".tmp_{file_name}.{os.getpid()}"
    try:
        _write_events(store, tmp, base, step)
    except OSError as exc:  # name the file being written (disk full, ...)
        tmp.unlink(missing_ok=True)
        raise OSError(exc.errno, exc.strerror, str(target)) from None
    return publish_file(tmp, target)


def _write_events(store: TableStore, tmp: Path, base: int, step: int | None) -> None:
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write('{"displayTimeUnit": "ms", "baseTimeNanoseconds": %d, "traceEvents": [\n' % base)
        first = True
        meta = _metadata_events(store)
        if meta:
            fh.write(",\n".join(meta))
            first = False
        for query, params in _queries(base, step):
            cur = store.con.execute(query, params)
            while batch := cur.fetchmany(_BATCH):
                if not first:
                    fh.write(",\n")
                fh.write(",\n".join(row[0] for row in batch))
                first = False
        fh.write("\n]}\n")
