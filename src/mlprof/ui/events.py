"""One timeline slice explained: the fields a person reads, and links to related slices.

A slice names its row by (table, id). The answer lists that row's meaningful
columns with their units (times since the run's origin, durations, bytes,
the device as "GPU 0, stream 7") rather than the raw database row, which is
still included for the curious. Links (parent op, launched kernels, the
launching op and runtime call) carry (src, id) so the page can jump to the
exact slice.
"""

from __future__ import annotations

from mlprof.analysis.devices import run_device
from mlprof.capture.trace_names import gc_event_name, step_event_name
from mlprof.tables.store import TableStore
from mlprof.ui.timeline import ROW_ORDER, SOURCES

__all__ = ["event_details"]

SRC = {name: i for i, name in enumerate(SOURCES)}
_LINK_LIMIT = 50


def _field(label: str, value, kind: str = "text") -> dict | None:
    """kind: text, time (ns since origin), ns (duration), bytes, pct, count."""
    if value is None or value == "":
        return None
    return {"label": label, "value": value, "kind": kind}


def _links(store: TableStore, src: str, query: str, params: list) -> list[dict]:
    rows = store.dicts(query + f" LIMIT {_LINK_LIMIT}", params)
    return [{"src": SRC[src], "id": r.pop("id"), **r} for r in rows]


def _row(store: TableStore, table: str, row_id: int) -> dict | None:
    if table in ("markers", "gc_pauses"):
        where = "WHERE kind <> 'device_annotation'" if table == "markers" else ""
        rows = store.dicts(f"SELECT * FROM (SELECT *, row_number() OVER (ORDER BY {ROW_ORDER[table]}) - 1 AS _row "
                           f"FROM {table} {where}) WHERE _row = ?", [row_id])
    else:
        key = {"host_ops": "op_id", "runtime_calls": "call_id", "device_ops": "device_op_id", "steps": "step"}[table]
        rows = store.dicts(f'SELECT * FROM "{table}" WHERE "{key}" = ? LIMIT 1', [row_id])
    if not rows:
        return None
    row = rows[0]
    row.pop("_row", None)
    return row


def _module_of(store: TableStore, row: dict) -> str | None:
    """The innermost nn.Module forward running on the op's thread when it started."""
    got = store.rows("""SELECT module_path FROM module_calls WHERE window_index = ? AND tid = ?
                        AND start_ns <= ? AND end_ns > ? ORDER BY depth DESC LIMIT 1""",
                     [row["window_index"], row["tid"], row["start_ns"], row["start_ns"]])
    return got[0][0] if got else None


def event_details(store: TableStore, src: int, row_id: int, origin_ns: int) -> dict | None:
    """``{table, name, fields, links, row}`` of one slice, or None when no such row."""
    if not 0 <= src < len(SOURCES):
        return None
    table = SOURCES[src]
    row = _row(store, table, row_id)
    if row is None:
        return None

    def at(ns):
        return None if ns is None else ns - origin_ns

    links: dict[str, list[dict]] = {}
    if table == "host_ops":
        fields = [_field("category", row["category"]), _field("thread", row["tid"]),
                  _field("start", at(row["start_ns"]), "time"), _field("duration", row["dur_ns"], "ns"),
                  _field("self time", row.get("folded_self_ns", row.get("self_ns")), "ns"),
                  _field("step", row["step"]), _field("input shapes", row["input_dims"]),
                  _field("input types", row["input_types"]), _field("module", _module_of(store, row)),
                  _field("autograd sequence number", row["sequence_number"])]
        if row.get("parent_op_id") is not None:
            links["parent op"] = _links(store, "host_ops", "SELECT op_id AS id, name, dur_ns FROM host_ops "
                                        "WHERE op_id = ?", [row["parent_op_id"]])
        links["device work launched"] = _links(store, "device_ops", """
            SELECT device_op_id AS id, name, dur_ns FROM device_ops WHERE host_op_id = ?
            ORDER BY start_ns, id""", [row_id])
        links["runtime calls"] = _links(store, "runtime_calls", """
            SELECT call_id AS id, name, dur_ns FROM runtime_calls WHERE host_op_id = ?
            ORDER BY start_ns, id""", [row_id])
    elif table == "runtime_calls":
        fields = [_field("category", row["category"]), _field("thread", row["tid"]),
                  _field("start", at(row["start_ns"]), "time"), _field("duration", row["dur_ns"], "ns"),
                  _field("step", row["step"]), _field("correlation id", row["correlation"])]
        links["device work launched"] = _links(store, "device_ops", """
            SELECT device_op_id AS id, name, dur_ns FROM device_ops WHERE window_index = ? AND correlation = ?""",
                                               [row["window_index"], row["correlation"]])
        if row.get("host_op_id") is not None:
            links["launching op"] = _links(store, "host_ops", "SELECT op_id AS id, name, dur_ns FROM host_ops "
                                           "WHERE op_id = ?", [row["host_op_id"]])
    elif table == "device_ops":
        kind = run_device(store).kind.upper()  # GPU or NPU
        where = f"{kind} {row['device']}" if row["device"] is not None else kind
        fields = [_field("kind", row["kind"]), _field("runs on", f"{where}, stream {row['stream']}"),
                  _field("start", at(row["start_ns"]), "time"), _field("duration", row["dur_ns"], "ns"),
                  _field("step", row["step"]), _field("grid", row["grid"]), _field("block", row["block"]),
                  _field("registers per thread", row["registers_per_thread"], "count"),
                  _field("shared memory per block", row["shared_memory_bytes"], "bytes"),
                  _field("estimated achieved occupancy", row["occupancy_pct"], "pct"),
                  _field("bytes", row["size_bytes"], "bytes"),
                  _field("communication", "yes" if row.get("is_communication") else None)]
        if row.get("host_op_id") is not None:
            links["launching op"] = _links(store, "host_ops", "SELECT op_id AS id, name, dur_ns FROM host_ops "
                                           "WHERE op_id = ?", [row["host_op_id"]])
        if row.get("correlation") is not None:
            links["runtime call"] = _links(store, "runtime_calls", """
                SELECT call_id AS id, name, dur_ns FROM runtime_calls WHERE window_index = ? AND correlation = ?""",
                                           [row["window_index"], row["correlation"]])
    elif table == "steps":
        fields = [_field("step", row["step"]), _field("start", at(row["start_ns"]), "time"),
                  _field("duration", row["dur_ns"], "ns"), _field("from", row["source"])]
    elif table == "markers":
        end = row.get("end_ns")
        fields = [_field("kind", row["kind"]), _field("start", at(row["start_ns"]), "time"),
                  _field("duration", None if end is None else end - row["start_ns"], "ns"),
                  _field("thread", row["tid"])]
    else:  # gc_pauses
        fields = [_field("generation", row["generation"]), _field("start", at(row["start_ns"]), "time"),
                  _field("pause", row["dur_ns"], "ns"), _field("objects collected", row["collected"], "count"),
                  _field("uncollectable", row["uncollectable"], "count"), _field("step", row["step"])]
    name = row.get("name") or (step_event_name(row["step"]) if table == "steps" else gc_event_name(row.get("generation")))
    return {"table": table, "name": name, "fields": [f for f in fields if f],
            "links": {k: v for k, v in links.items() if v}, "row": row}
