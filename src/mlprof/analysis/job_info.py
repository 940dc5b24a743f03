"""Job information of one parsed output: who, where, when, how many steps, how big."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from pathlib import Path

from mlprof.analysis.communication import rank_of
from mlprof.analysis.monitor import monitor_overview
from mlprof.capture.layout import RAW_DIR
from mlprof.tables.store import TableStore

__all__ = ["JobInfo", "job_info"]


@dataclass(frozen=True)
class JobInfo:
    job: str
    source: str
    rank: int | None
    devices: list[int]
    start_ns: int | None
    end_ns: int | None
    step_count: int
    slowest_steps: list[dict]  # [{"step", "window", "dur_ns"}], slowest first, at most 5
    raw_bytes: int
    output_bytes: int
    event_count: int
    # Monitor mode: steps monitored and the windows opened ({"steps", "records", "windows", "skipped"}); None: off.
    monitor: dict | None = None

    def to_dict(self) -> dict:
        return asdict(self)


def _dir_bytes(path: Path, leave_out: Path | None = None) -> int:
    """Bytes of the files at or under ``path``; ``leave_out``: a folder inside it not counted (a torch_npu
    rank folder holds its parsed output, mlprof_output/: that is not raw data)."""
    if path.is_file():
        return path.stat().st_size
    skip = Path(os.path.abspath(leave_out)) if leave_out is not None else None
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink()
               and (skip is None or skip not in Path(os.path.abspath(p)).parents))


def job_info(store: TableStore, source: Path, output_dir: Path) -> JobInfo:
    job = store.meta("capture.worker_name") or Path(source).name
    start, end = store.rows("""SELECT min(s), max(e) FROM (
        SELECT min(start_ns) s, max(start_ns + dur_ns) e FROM host_ops
        UNION ALL SELECT min(start_ns), max(start_ns + dur_ns) FROM device_ops
        UNION ALL SELECT min(start_ns), max(end_ns) FROM steps)""")[0]
    slowest = store.dicts("SELECT step, window_index AS window, dur_ns FROM steps "
                          "ORDER BY dur_ns DESC, step, window_index LIMIT 5")
    devices = [r[0] for r in store.rows("SELECT DISTINCT device FROM device_ops WHERE device IS NOT NULL ORDER BY 1")]
    raw = Path(source) / RAW_DIR if (Path(source) / RAW_DIR).is_dir() else Path(source)
    # One eventCount row per window: the capture's count is their sum.
    events = sum(int(v) for v in store.meta_values("eventCount"))
    return JobInfo(
        job=str(job), source=str(source), rank=rank_of(store), devices=devices,
        start_ns=start, end_ns=end, step_count=store.count("steps"), slowest_steps=slowest,
        raw_bytes=_dir_bytes(raw, output_dir), output_bytes=_dir_bytes(output_dir), event_count=events,
        monitor=monitor_overview(store),
    )
