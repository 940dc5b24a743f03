"""``mlprof parse`` of one torch_npu rank folder: its rows, through the shared
table builder, into the same tables as a Kineto trace (plus the Ascend-only
``device_op_details`` and ``device_op_metrics``)."""

from __future__ import annotations

import sqlite3

import msgspec
import numpy as np

from mlprof.errors import TraceFormatError
from mlprof.parse.ascend_common import AscendInput, AscendRows, link_host_ops, link_memory_ops
from mlprof.parse.build import WindowData, build_tables
from mlprof.parse.kineto_events import StringPool, StringTooLongError

__all__ = ["read_ascend", "ascend_tables"]


def _metadata(item: AscendInput, rows: AscendRows) -> dict[str, object]:
    meta: dict[str, object] = {"source.path": str(item.path), "source.format": f"ascend_{item.format}",
                               "device_type": "npu", "capture.worker_name": item.path.name}
    if item.rank is not None:
        meta["capture.rank"] = item.rank
        meta["distributedInfo"] = {"rank": item.rank, "backend": "hccl"}
    for key in ("config", "start_info", "end_info"):
        if key in item.manifest:
            meta[f"ascend.profiler_info.{key}"] = item.manifest[key]
    for key, value in item.metadata.items():
        meta["profiler_metadata.environment" if key == "ENV_VARIABLES" else f"profiler_metadata.{key}"] = value
    meta.update(rows.metadata)
    return meta


def _read_rows(item: AscendInput) -> AscendRows:
    try:
        if item.format == "db":
            from mlprof.parse.ascend_db import read_ascend_db
            return read_ascend_db(item)
        from mlprof.parse.ascend_text import read_ascend_text
        return read_ascend_text(item)
    except sqlite3.DatabaseError as exc:
        raise TraceFormatError(f"{item.db_path}: not a readable torch_npu profiler database ({exc})") from None
    except (ValueError, TypeError, KeyError, IndexError, msgspec.MsgspecError) as exc:
        # A value of an unexpected type or shape that the readers' own checks did not catch.
        where = item.db_path if item.format == "db" else item.profiler_output
        raise TraceFormatError(f"{where}: unexpected content ({type(exc).__name__}: {exc})") from None


def _extra(rows, pool: StringPool, window: int) -> dict[str, np.ndarray]:
    cols = rows.arrays(pool)
    if cols:
        cols["device_op_id"] = cols.pop("device_row")
        cols["window_index"] = np.full(len(cols["device_op_id"]), window, dtype=np.int64)
    return cols


def ascend_tables(item: AscendInput) -> tuple[dict[str, dict[str, np.ndarray]], StringPool, AscendRows]:
    """Table columns of one rank folder (string columns as codes of the returned pool)."""
    rows = _read_rows(item)
    pool = StringPool()
    try:
        k, launch = rows.kineto_columns(pool)
        columns = build_tables([WindowData(window_index=0, kineto=k)], pool, _metadata(item, rows))
        extras = {name: _extra(part, pool, 0) for name, part in (("device_op_details", rows.details),
                                                                 ("device_op_metrics", rows.metrics))}
    except StringTooLongError as exc:  # one name, shape or type text past the 1 MiB every reader refuses
        where = item.db_path if item.format == "db" else item.profiler_output
        raise TraceFormatError(f"{where}: {exc}") from None
    link_host_ops(columns, launch, int(rows.metadata.get("ascend.python_pid") or 0), pool)
    link_memory_ops(columns, rows.memory_ops, pool)
    columns.update({name: cols for name, cols in extras.items() if cols})
    return columns, pool, rows


def read_ascend(item: AscendInput, result) -> tuple[dict, list[str]]:
    """Table columns and strings of ``item``, filling ``result`` (the pipeline's ParseResult) as it reads.

    The pipeline writes them (``write_parsed``), as for every other input format.
    """
    columns, pool, rows = ascend_tables(item)
    result.event_count = rows.event_count
    result.unknown_events = {f"{ph}/{cat}": n for (ph, cat), n in rows.unknown.items()}
    result.table_rows = {name: len(cols["window_index"]) for name, cols in columns.items()}
    return columns, pool.values()
