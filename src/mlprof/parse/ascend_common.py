"""What both Ascend parsers share: finding ``*_ascend_pt`` folders, exact time
conversion, the rank's metadata, and turning parsed rows into the same
column arrays the Kineto parser hands to :func:`mlprof.parse.build.build_tables`.

torch_npu writes one ``<name>_ascend_pt`` folder per rank: ``profiler_info_N.json``
(config, clock anchors, ``rank_id``), ``profiler_metadata.json`` (environment)
and ``ASCEND_PROFILER_OUTPUT/`` with either the text files (``trace_view.json``,
``kernel_details.csv``, ...) or the SQLite export (``ascend_pytorch_profiler_N.db``).
The text parser is :mod:`mlprof.parse.ascend_text`, the SQLite one
:mod:`mlprof.parse.ascend_db`; both fill an :class:`AscendRows`.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from functools import lru_cache
from pathlib import Path

import numpy as np

from mlprof.capture import layout
from mlprof.errors import CaptureError, TraceFormatError
from mlprof.parse.kineto_events import MISSING, KinetoColumns, StringPool

__all__ = ["AscendInput", "AscendRows", "is_ascend_dir", "ascend_root_of", "read_ascend_dir", "us_text_to_ns",
           "shapes_json", "FLOAT_COLUMNS", "NPU_DEVICE_TYPE", "MEMCPY_TASKS", "COMM_SUBTASKS",
           "torch_dtype", "link_host_ops"]

OUTPUT_SUBDIR = "ASCEND_PROFILER_OUTPUT"
TEXT_MARKER = "trace_view.json"
_DB_NAME = re.compile(r"^ascend_pytorch_profiler(?:_(\d+))?\.db$")
_INFO_NAME = re.compile(r"^profiler_info(?:_(\d+))?\.json$")
# ge_pool_totals: operator_memory.csv (OP_MEMORY) mixes two allocators' allocations: torch_npu's caching
# allocator (PTA, 1.1 GiB on alexnet_ddp_910b; rows with a Stream Ptr) and the graph engine's (GE, 7-75 MB;
# rows without one, its cann:: ops). Each row's totals are its own pool's, so one curve through both was a
# saw-tooth between 1452 MB and 74.75 MB reserved. The GE rows keep their size and op but no totals: the
# device's memory curve is PTA's, and each pool's own curve is its npu_memory:<pool> counter (memory_record.csv).
# torch's DeviceType of the NPU (PrivateUse1), the memory_events.device_type of NPU rows.
NPU_DEVICE_TYPE = 20
# Columns of AscendRows tables that are floats, not integers or text.
FLOAT_COLUMNS = {"value", "occupancy_pct"}


@dataclass
class AscendInput:
    """One rank's ``*_ascend_pt`` folder and which export it holds."""

    path: Path  # the rank folder, as every input kind spells its path
    format: str  # "text" or "db"
    manifest: dict  # profiler_info_N.json, torch_npu's manifest
    metadata: dict  # profiler_metadata.json
    db_path: Path | None = None

    @property
    def output_dir(self) -> Path:
        return self.path / layout.OUTPUT_DIR

    @property
    def profiler_output(self) -> Path:
        return self.path / OUTPUT_SUBDIR

    @property
    def rank(self) -> int | None:
        rank = self.manifest.get("rank_id")
        return rank if isinstance(rank, int) and rank >= 0 else None


def _db_file(out: Path) -> Path | None:
    if not out.is_dir():
        return None
    return next((p for p in sorted(out.iterdir()) if _DB_NAME.match(p.name) and p.is_file()), None)


def is_ascend_dir(path: Path) -> bool:
    """A torch_npu output folder: ASCEND_PROFILER_OUTPUT with a trace_view.json or a profiler db."""
    out = Path(path) / OUTPUT_SUBDIR
    return out.is_dir() and ((out / TEXT_MARKER).is_file() or _db_file(out) is not None)


def ascend_root_of(path: Path) -> Path | None:
    """The rank folder of ``path`` when it is one, its ASCEND_PROFILER_OUTPUT, or a file in there."""
    path = Path(path)
    for candidate in (path, path.parent, path.parent.parent):
        if is_ascend_dir(candidate) and (candidate == path or OUTPUT_SUBDIR in path.relative_to(candidate).parts[:1]):
            return candidate
    return None


def _load_json(path: Path) -> dict:
    try:
        value = json.loads(path.read_bytes())
    except (OSError, ValueError) as exc:
        raise CaptureError(f"{path}: unreadable JSON ({exc})") from None
    if not isinstance(value, dict):
        raise CaptureError(f"{path}: not a JSON object")
    return value


def read_ascend_dir(path: Path) -> AscendInput:
    """The rank folder at ``path``: the text export when present, else the SQLite one."""
    path = Path(path)
    info_files = [p for p in sorted(path.iterdir()) if _INFO_NAME.match(p.name) and p.is_file()]
    manifest = _load_json(info_files[0]) if info_files else {}
    meta_path = path / layout.METADATA_FILE
    metadata = _load_json(meta_path) if meta_path.is_file() else {}
    out = path / OUTPUT_SUBDIR
    if (out / TEXT_MARKER).is_file():
        return AscendInput(path, "text", manifest, metadata)
    db = _db_file(out)
    if db is None:
        raise CaptureError(f"{out}: neither {TEXT_MARKER} nor ascend_pytorch_profiler_N.db found")
    return AscendInput(path, "db", manifest, metadata, db_path=db)


def us_text_to_ns(text, path: Path | str = "", what: str = "time") -> int | None:
    """Microseconds written as text ("1736408883704643.212", maybe with a trailing tab)
    to integer ns, exactly (no float rounding); fractions below 1 ns are rounded half-even.
    Empty and "N/A" give None; anything else unreadable raises TraceFormatError naming ``path``."""
    if type(text) is str:
        whole, _, frac = text.partition(".")
        if len(frac) == 3 and whole.isdigit() and frac.isdigit():  # the common case, fast
            return int(whole) * 1000 + int(frac)
    elif text is None:
        return None
    elif isinstance(text, int):
        return text * 1000
    elif isinstance(text, float):
        # A duration: |x| < 1e9 us keeps the float's error far below 1 ns.
        return round(text * 1000) if abs(text) < 1e9 else int((Decimal(repr(text)) * 1000).to_integral_value())
    s = text.strip()
    if not s or s == "N/A":
        return None
    whole, dot, frac = s.partition(".")
    if whole.isdigit() and (not frac or frac.isdigit()) and len(frac) <= 3:
        return int(whole) * 1000 + int((frac + "000")[:3])
    try:
        return int((Decimal(s) * 1000).to_integral_value())
    except (InvalidOperation, ValueError):
        raise TraceFormatError(f"{path}: {what} {s!r} is not a number of microseconds") from None


# HCCL data type names -> the torch dtype names the tables use elsewhere.
_HCCL_DTYPES = {"FP32": "float32", "FP16": "float16", "BFP16": "bfloat16", "BF16": "bfloat16",
                "FP64": "float64", "INT8": "int8", "INT16": "int16", "INT32": "int32", "INT64": "int64",
                "UINT8": "uint8", "UINT16": "uint16", "UINT32": "uint32", "UINT64": "uint64"}
DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8, "int8": 1, "int16": 2, "int32": 4,
               "int64": 8, "uint8": 1, "uint16": 2, "uint32": 4, "uint64": 8}


# Hardware task types: copies (device_ops kind memcpy; not in kernel_details.csv), and the
# sub-tasks of an HCCL collective (not imported: the collective is one device op).
MEMCPY_TASKS = frozenset({"PCIE_DMA_SQE", "SDMA_SQE", "MEMCPY_ASYNC"})
COMM_SUBTASKS = frozenset({"Notify Wait", "Notify Record", "Write Value", "SDMA", "Reduce Inline", "Reduce_Inline"})


@lru_cache(maxsize=65536)
def shapes_json(text: str | None, numeric: bool) -> str | None:
    """torch_npu's shape/type lists ("32,3,224,224;\\r\\n64", "FLOAT;INT64") to JSON text."""
    if not text or text == "N/A":
        return None
    parts = [p.strip().strip('"') for p in text.replace("\r", "").replace("\n", "").split(";")]
    if numeric:
        return json.dumps([[int(x) for x in p.split(",") if x.strip().lstrip("-").isdigit()] for p in parts])
    return json.dumps(parts)


def torch_dtype(hccl_name: str | None) -> str | None:
    if not hccl_name:
        return None
    return _HCCL_DTYPES.get(hccl_name.upper(), hccl_name.lower())


class RowSet:
    """Rows of one kind, kept as tuples in column order; ``add`` takes keywords (absent -> None),
    ``row`` the values in column order (the hot path of big traces)."""

    def __init__(self, *names: str) -> None:
        self.names = names
        self.rows: list[tuple] = []

    def add(self, **values) -> None:
        self.rows.append(tuple(values.get(name) for name in self.names))

    def row(self, *values) -> None:
        self.rows.append(values)

    def __len__(self) -> int:
        return len(self.rows)

    @property
    def cols(self) -> dict[str, tuple]:
        return dict(zip(self.names, zip(*self.rows))) if self.rows else {n: () for n in self.names}

    def arrays(self, pool: StringPool | None) -> dict[str, np.ndarray]:
        if not len(self):
            return {}
        out = {}
        for name, values in self.cols.items():
            values = list(values)
            sample = next((v for v in values if v is not None), None)
            if name in FLOAT_COLUMNS:
                out[name] = np.array([np.nan if v is None else float(v) for v in values], dtype=np.float64)
            elif isinstance(sample, bool):
                out[name] = np.array([bool(v) for v in values], dtype=bool)
            elif isinstance(sample, str) or sample is None and name not in _INT_NAMES:
                out[name] = pool.codes(values) if pool is not None else np.array(values, dtype=object)
            else:
                out[name] = np.array([MISSING if v is None else int(v) for v in values], dtype=np.int64)
        return out


# Integer columns that may be all-NULL (so their type cannot be seen from a value).
_INT_NAMES = {"pid", "tid", "start_ns", "dur_ns", "correlation", "external_id", "sequence_number",
              "fwd_thread_id", "device", "stream", "size_bytes", "registers_per_thread", "shared_memory_bytes",
              "group_size", "in_nelems", "out_nelems", "device_row", "flow_id", "ts_ns", "device_type",
              "device_id", "addr", "total_allocated_bytes", "total_reserved_bytes", "block_dim",
              "mix_block_dim", "wait_ns", "task_id", "context_id", "launch_tid", "launch_ns"}


@dataclass
class AscendRows:
    """One rank's rows, filled by a parser, turned into Kineto-shaped columns."""

    host: RowSet = field(default_factory=lambda: RowSet(
        "name", "category", "pid", "tid", "start_ns", "dur_ns", "external_id", "sequence_number",
        "fwd_thread_id", "input_dims", "input_types"))
    runtime: RowSet = field(default_factory=lambda: RowSet(
        "name", "category", "pid", "tid", "start_ns", "dur_ns", "correlation", "external_id"))
    # Device ops; launch_tid/launch_ns: the host point (torch_to_npu flow) that launched it.
    device: RowSet = field(default_factory=lambda: RowSet(
        "name", "kind", "device", "stream", "start_ns", "dur_ns", "correlation", "size_bytes",
        "is_communication", "launch_tid", "launch_ns"))
    collectives: RowSet = field(default_factory=lambda: RowSet(
        "device_row", "collective_name", "group_name", "group_size", "dtype", "in_nelems", "out_nelems"))
    details: RowSet = field(default_factory=lambda: RowSet(
        "device_row", "task_type", "accelerator_core", "op_type", "op_state", "task_id", "context_id",
        "block_dim", "mix_block_dim", "wait_ns", "input_shapes", "input_dtypes", "input_formats",
        "output_shapes", "output_dtypes", "output_formats", "source"))
    metrics: RowSet = field(default_factory=lambda: RowSet("device_row", "metric", "value"))
    flows: RowSet = field(default_factory=lambda: RowSet("ph", "category", "flow_id", "pid", "tid", "ts_ns"))
    memory: RowSet = field(default_factory=lambda: RowSet(
        "ts_ns", "pid", "tid", "device_type", "device_id", "addr", "size_bytes", "total_allocated_bytes",
        "total_reserved_bytes"))
    counters: RowSet = field(default_factory=lambda: RowSet("name", "series", "pid", "ts_ns", "value"))
    threads: list = field(default_factory=list)
    metadata: dict = field(default_factory=dict)
    unknown: Counter = field(default_factory=Counter)
    event_count: int = 0
    # Per memory row: the op operator_memory.csv (OP_MEMORY) names for an allocation, else None.
    memory_ops: list = field(default_factory=list)
    # Communication group name -> its ranks as JSON text (communication_matrix.json's links).
    group_ranks: dict = field(default_factory=dict)

    def kineto_columns(self, pool: StringPool) -> tuple[KinetoColumns, dict[str, np.ndarray]]:
        """The rows as the Kineto parser's columns, and each device op's launch point
        (``launch_tid``, ``launch_ns``) for :func:`link_host_ops`."""
        dev = self.device.arrays(pool)
        launch = {k: dev.pop(k) for k in ("launch_tid", "launch_ns")} if dev else {}
        coll = self.collectives.arrays(pool)
        if coll:
            for key in ("in_split_size", "out_split_size", "group_ranks", "group_desc"):
                coll[key] = np.full(len(coll["device_row"]), -1, dtype=np.int32)
            if self.group_ranks:
                names = self.collectives.cols["group_name"]
                ranks = dict(self.group_ranks)
                # The SQLite export names a group by its full name ("90.91.105.46%enp189s0f0_60000_0_...") where
                # analysis.db uses its hash: one group on each side is the same group.
                if len(ranks) == 1 and len(set(names)) == 1 and names[0] not in ranks:
                    ranks[names[0]] = next(iter(ranks.values()))
                coll["group_ranks"] = np.array([pool.code(ranks[g]) if g in ranks else -1 for g in names],
                                               dtype=np.int32)
        flows = self.flows.arrays(pool)
        if flows:
            flows["ph"] = flows["ph"].astype(np.int8)
        k = KinetoColumns(
            base_time_ns=0,
            host=self.host.arrays(pool), runtime=self.runtime.arrays(pool), device=dev, collectives=coll,
            flows=flows, memory=self.memory.arrays(pool), counters=self.counters.arrays(pool),
            threads=list(self.threads), unknown=Counter(self.unknown), event_count=self.event_count)
        return k, launch


def link_host_ops(columns: dict[str, dict[str, np.ndarray]], launch: dict[str, np.ndarray], pid: int,
                  pool: StringPool) -> None:
    """Point each device op at the host op its torch_to_npu flow starts in.

    torch_npu launches through a task queue (the runtime call runs on a worker
    thread), so the runtime-call link of :func:`build_tables` reaches only the
    queue's Dequeue op; the flow names the framework op itself: the innermost
    ``aten::`` op on the flow's thread that contains the flow's start (else the
    innermost op). torch_npu nests its own op records (``Conv2D``,
    ``aclnnInplaceCopy``) inside the aten op; preferring the aten op keeps the
    link comparable with a GPU trace, where kernels hang off aten ops.
    """
    dev, host = columns.get("device_ops"), columns.get("host_ops")
    if not dev or not host or not launch or not len(launch["launch_ns"]):
        return
    h_tid, h_start = host["tid"], host["start_ns"]
    h_end = h_start + host["dur_ns"]
    h_depth = np.where(host["depth"] == MISSING, -1, host["depth"])
    aten_codes = np.array([c for c, v in enumerate(pool.values()) if isinstance(v, str) and v.startswith("aten::")],
                          dtype=np.int64)
    h_aten = np.isin(host["name"], aten_codes) if host["name"].dtype != object else \
        np.array([str(v).startswith("aten::") for v in host["name"]])
    by_tid: dict[int, np.ndarray] = {int(t): np.flatnonzero((h_tid == t) & (host["pid"] == pid))
                                     for t in np.unique(launch["launch_tid"][launch["launch_tid"] != MISSING])}
    op_ids, steps = dev["host_op_id"], dev["step"]
    # Without a flow, a device op whose runtime call ran in the queue's Dequeue op
    # was launched where the matching Enqueue (same correlation) ran.
    cat = host["category"]
    is_cat = (lambda name: cat == pool.code(name)) if cat.dtype != object else (lambda name: cat == name)
    enq = np.flatnonzero(is_cat("enqueue") & (host["external_id"] != MISSING))
    enqueued = {int(host["external_id"][j]): (int(h_tid[j]), int(h_start[j])) for j in enq}
    deq_ext = dict(zip(host["op_id"][is_cat("dequeue")].tolist(), host["external_id"][is_cat("dequeue")].tolist()))
    for i, op in enumerate(op_ids.tolist()):
        if launch["launch_tid"][i] == MISSING and deq_ext.get(op, MISSING) in enqueued:
            launch["launch_tid"][i], launch["launch_ns"][i] = enqueued[deq_ext[op]]
    by_tid.update({int(t): np.flatnonzero((h_tid == t) & (host["pid"] == pid))
                   for t in np.unique(launch["launch_tid"][launch["launch_tid"] != MISSING]) if int(t) not in by_tid})
    for i, (tid, ts) in enumerate(zip(launch["launch_tid"].tolist(), launch["launch_ns"].tolist())):
        if tid == MISSING or ts == MISSING:
            continue
        cand = by_tid.get(tid)
        if cand is None or not len(cand):
            continue
        inside = cand[(h_start[cand] <= ts) & (ts < h_end[cand]) & (h_depth[cand] >= 0)]
        if len(inside):
            aten = inside[h_aten[inside]]
            pick = aten if len(aten) else inside
            best = pick[np.argmax(h_depth[pick])]
            op_ids[i] = host["op_id"][best]
            if host["step"][best] != MISSING:
                steps[i] = host["step"][best]
    coll = columns.get("collectives")
    if coll:  # a collective's step is its device op's
        order = np.argsort(dev["device_op_id"])
        pos = np.searchsorted(dev["device_op_id"][order], coll["device_op_id"])
        coll["step"] = steps[order][pos]


def link_memory_ops(columns: dict[str, dict[str, np.ndarray]], op_names: list, pool: StringPool) -> None:
    """Point each allocation at the host op torch_npu names for it (operator_memory.csv's Name): the latest
    op of that name to start before it and still running. The file gives no thread, so the table builder's
    link (the innermost op on the allocation's thread) found none and every allocation was "(no op)"
    (184 of 184 on alexnet_ddp_910b rank 0). Names of no host op (the GE pool's ``cann::`` ops) stay unlinked.
    """
    mem, host = columns.get("memory_events"), columns.get("host_ops")
    if not mem or not host or not any(op_names) or len(op_names) != len(mem["ts_ns"]):
        return
    code_of = {v: c for c, v in enumerate(pool.values())}
    names = host["name"]
    starts, ends = host["start_ns"], host["start_ns"] + host["dur_ns"]
    by_code: dict[int, np.ndarray] = {}
    owner = mem["host_op_id"]
    for i, (name, ts) in enumerate(zip(op_names, mem["ts_ns"].tolist())):
        code = code_of.get(name) if name else None
        if code is None:
            continue
        if code not in by_code:
            idx = np.flatnonzero(names == code)
            by_code[code] = idx[np.argsort(starts[idx], kind="stable")]
        idx = by_code[code]
        for j in idx[:np.searchsorted(starts[idx], ts, side="right")][::-1]:
            if ends[j] > ts:
                owner[i] = host["op_id"][j]
                break
