"""One rank's share of a cluster analysis, extracted where the rank is parsed.

``extract_rank(store, source)`` reads one rank's tables and returns small
plain data (per-step breakdown, communication ops, traffic per group), so only
that travels back from the worker process (or Dask worker) that parsed the
rank (:func:`mlprof.cluster_workflow.parse_and_extract`; ``cluster_workflow.rank_data`` for an output
directory that is already parsed). Nothing here parses or opens tables from a path.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from mlprof.analysis.communication import communication_matrix, rank_of
from mlprof.analysis.intervals import union_length
from mlprof.analysis.jobs import run_identity
from mlprof.analysis.rank_cause import rank_attribution
from mlprof.analysis.steps import step_breakdown
from mlprof.tables.names import BACKEND_COLLECTIVE_REGEX
from mlprof.tables.store import TableStore

__all__ = ["extract_rank", "group_key"]

_DTYPE_BYTES = {"float": 4, "double": 8, "half": 2, "c10::half": 2, "c10::bfloat16": 2, "bfloat16": 2,
                "long int": 8, "long": 8, "int": 4, "short int": 2, "signed char": 1, "unsigned char": 1,
                "bool": 1, "c10::float8_e4m3fn": 1, "c10::float8_e5m2": 1}


def _message_bytes(dims: str | None, types: str | None) -> int | None:
    """Bytes of a host comm op's first input (elements x dtype size), when shapes were recorded."""
    try:
        shapes, dtypes = json.loads(dims or "null"), json.loads(types or "null")
    except ValueError:
        return None
    if not shapes or not isinstance(shapes, list):
        return None
    first = shapes[0]
    while isinstance(first, list) and first and isinstance(first[0], list):
        first = first[0]  # a list of tensors: count the first
    if not isinstance(first, list) or not all(isinstance(d, int) for d in first):
        return None
    size = _DTYPE_BYTES.get(str(dtypes[0]).lower(), 4) if isinstance(dtypes, list) and dtypes else 4
    return int(np.prod(first, dtype=np.int64)) * size if first else size


def _comm_ops(store: TableStore) -> tuple[str, list[dict]]:
    """("device"|"host", ops): communication ops in steps with name, group, start, dur, bytes."""
    rows = store.dicts("""
        SELECT coalesce(collective_name, name) AS name, coalesce(group_name, '') AS grp, step,
               start_ns, dur_ns, size_bytes FROM collectives WHERE step IS NOT NULL ORDER BY start_ns, device_op_id""")
    if rows:
        return "device", rows
    rows = store.dicts(f"""
        SELECT name, '' AS grp, step, start_ns, dur_ns, input_dims, input_types FROM host_ops
        WHERE step IS NOT NULL AND regexp_matches(name, '{BACKEND_COLLECTIVE_REGEX}') ORDER BY start_ns, op_id""")
    for r in rows:
        r["size_bytes"] = _message_bytes(r.pop("input_dims"), r.pop("input_types"))
    return "host", rows


def extract_rank(store: TableStore, source: str, output_dir: str | Path | None = None) -> dict:
    """Plain data of one rank (its tables in ``store``) for :func:`mlprof.analysis.cluster.combine`.

    ``source`` names the rank (its capture or trace) in the report; ``output_dir``, where its tables are, is
    only recorded.
    """
    rank = rank_of(store)
    identity = run_identity(store, source).to_dict()
    steps = step_breakdown(store)
    kind, comm = _comm_ops(store)
    matrix = communication_matrix(store)
    by_step: dict[tuple[int, int], list[tuple[int, int]]] = {}
    for op in comm:
        by_step.setdefault(op["step"], []).append((op["start_ns"], op["start_ns"] + op["dur_ns"]))
    step_rows = []
    for s in steps:
        if kind == "device" or s.computing_ns is not None:
            comm_ns = s.communication_ns or 0
            exposed = s.communication_not_overlapped_ns or 0
            free = (s.free_ns or 0) + (s.preparing_ns or 0)
            compute = s.computing_ns or 0
        else:
            iv = by_step.get(s.step, [])
            cs = np.maximum(np.array([a for a, _ in iv], dtype=np.int64), s.start_ns)
            ce = np.minimum(np.array([b for _, b in iv], dtype=np.int64), s.end_ns)
            keep = ce > cs
            cs, ce = cs[keep], ce[keep]
            comm_ns = exposed = union_length(cs, ce)
            free = None
            # CPU: whatever the step spends outside communication is this rank's own work.
            compute = s.dur_ns - comm_ns
        step_rows.append({"window": s.window, "step": s.step, "dur_ns": s.dur_ns, "compute_ns": compute,
                          "communication_ns": comm_ns, "communication_not_overlapped_ns": exposed,
                          "free_ns": free, "data_loading_ns": s.data_loading_ns})
    return {"rank": rank, "source": source, "output_dir": None if output_dir is None else str(output_dir),
            "comm_kind": kind, "identity": identity, "steps": step_rows, "comm_ops": comm, "matrix": matrix,
            # Means per step of the rank's phases, call sites, modules: what a slow rank's cause is read from.
            "attribution": rank_attribution(store, steps)}


def group_key(op: dict) -> tuple:
    # Instances of one collective are matched across ranks by name, group and order of issue.
    return (op["name"], op["grp"])

