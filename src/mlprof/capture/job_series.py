"""Monitor mode's whole-job step series: fixed-size binary records, bounded on disk (docs/monitor.md).

``job_steps.bin`` in the capture directory: a 16-byte header (magic, record
size) then records of ``len(FIELDS)`` little-endian int64, one per step. The
writer keeps at most ``cap_records`` records: when the file reaches the cap it
rewrites it once with each pair of neighbouring records merged (times summed,
memory the larger, the window flag and trigger kept), and from then on every
record holds twice as many steps (``steps``). So a job of any length keeps
every step, at full resolution until the cap and at 2, 4, 8... steps a record
after; the file never passes ``cap_records`` records. Both the writer
(``mlprof.collect.monitor``) and the parser read the format here.
"""

from __future__ import annotations

import os
import struct
import sys
from array import array
from pathlib import Path

__all__ = ["FIELDS", "RECORD_BYTES", "HEADER", "DEFAULT_CAP_RECORDS", "TRIGGERS", "SeriesWriter", "read_series",
           "SERIES_FILE", "MONITOR_FILE"]

SERIES_FILE = "job_steps.bin"
MONITOR_FILE = "job_monitor.json"  # the monitor's settings and triggered windows, written at stop

FIELDS = ("step", "steps", "start_ns", "wall_ns", "cpu_ns", "wait_ns", "data_ns", "gc_ns", "rss_bytes",
          "covered", "trigger")
RECORD_BYTES = 8 * len(FIELDS)
HEADER = b"MLPSTEP1" + struct.pack("<II", RECORD_BYTES, 0)
# 262,144 records of 88 bytes: 22 MiB whatever the job's length.
DEFAULT_CAP_RECORDS = 1 << 18
# Trigger codes in the ``trigger`` field (0: none), by reason.
TRIGGERS = {1: "baseline", 2: "slow_steps", 3: "throughput_drop", 4: "memory_growth"}
_FLUSH_RECORDS = 512
_N = len(FIELDS)
_STEP, _STEPS, _START, _WALL, _CPU, _WAIT, _DATA, _GC, _RSS, _COVERED, _TRIGGER = range(_N)


def _merge(into: list[int], rec) -> None:
    """Fold record ``rec`` (the later one) into ``into``: times summed, memory the larger, flags kept."""
    if into[_STEPS] == 0:
        into[:] = list(rec)
        return
    into[_STEPS] += rec[_STEPS]
    for i in (_WALL, _CPU, _WAIT, _DATA, _GC):
        into[i] = -1 if into[i] < 0 or rec[i] < 0 else into[i] + rec[i]
    into[_RSS] = max(into[_RSS], rec[_RSS])
    into[_COVERED] = max(into[_COVERED], rec[_COVERED])
    into[_TRIGGER] = into[_TRIGGER] or rec[_TRIGGER]


class SeriesWriter:
    """Appends step records to ``path``, at most ``cap_records`` of them (see the module doc).

    ``add`` costs a list append; every ``_FLUSH_RECORDS`` records one ``os.write``. Unknown values are -1.
    """

    def __init__(self, path: Path, cap_records: int = DEFAULT_CAP_RECORDS) -> None:
        if cap_records < 2:
            raise ValueError("cap_records must be at least 2")
        self.path = Path(path)
        self.cap = cap_records
        self.stride = 1  # steps per record
        self.records_on_disk = 0
        self.compactions = 0
        self._buf = array("q")
        self._pending = [0] * _N  # a record still gathering its ``stride`` steps
        self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o640)
        os.write(self._fd, HEADER)

    def add(self, step: int, start_ns: int, wall_ns: int, cpu_ns: int, wait_ns: int, data_ns: int, gc_ns: int,
            rss_bytes: int, covered: int, trigger: int) -> None:
        rec = (step, 1, start_ns, wall_ns, cpu_ns, wait_ns, data_ns, gc_ns, rss_bytes, covered, trigger)
        if self.stride == 1:
            self._buf.extend(rec)
        else:
            pending = self._pending
            _merge(pending, rec)
            if pending[_STEPS] < self.stride:
                return
            self._buf.extend(pending)
            self._pending = [0] * _N
        if len(self._buf) >= _FLUSH_RECORDS * _N or self.records_on_disk + len(self._buf) // _N >= self.cap:
            self.flush()

    def add_rows(self, rows: list[tuple[int, ...]]) -> None:
        """Records of one step each, in ``FIELDS`` order (``steps`` 1): as ``add`` for each, in one pass while
        records are one step each and the cap is not near."""
        if self.stride != 1 or self.records_on_disk + len(self._buf) // _N + len(rows) >= self.cap:
            for rec in rows:
                self.add(*rec[:1], *rec[2:])
            return
        extend = self._buf.extend
        for rec in rows:
            extend(rec)
        if len(self._buf) >= _FLUSH_RECORDS * _N:
            self.flush()

    def flush(self) -> None:
        if self._fd is None or not self._buf:
            return
        if sys.byteorder != "little":
            self._buf.byteswap()
        os.write(self._fd, self._buf.tobytes())
        self.records_on_disk += len(self._buf) // _N
        self._buf = array("q")
        if self.records_on_disk >= self.cap:
            self._compact()

    def _compact(self) -> None:
        """Rewrite the file with neighbouring records merged in pairs: half the records, twice the steps each."""
        data = array("q")
        with open(self.path, "rb") as f:
            f.seek(len(HEADER))
            data.frombytes(f.read(self.records_on_disk * RECORD_BYTES))
        if sys.byteorder != "little":
            data.byteswap()
        out = array("q")
        for k in range(0, self.records_on_disk, 2):
            merged = list(data[k * _N:(k + 1) * _N])
            if k + 1 < self.records_on_disk:
                _merge(merged, data[(k + 1) * _N:(k + 2) * _N])
            out.extend(merged)
        if sys.byteorder != "little":
            out.byteswap()
        tmp = self.path.with_name(self.path.name + ".tmp")
        with open(tmp, "wb") as f:
            f.write(HEADER)
            f.write(out.tobytes())
        os.replace(tmp, self.path)
        os.close(self._fd)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)
        self.records_on_disk = len(out) // _N
        self.stride *= 2
        self.compactions += 1

    def close(self) -> None:
        if self._fd is None:
            return
        if self._pending[_STEPS]:
            self._buf.extend(self._pending)
            self._pending = [0] * _N
        self.flush()
        os.close(self._fd)
        self._fd = None


def read_series(path: Path) -> list[tuple[int, ...]]:
    """The records of a series file, in order; a torn last record (a killed job) is left out.

    Raises ValueError when the file is not a series file (wrong header).
    """
    with open(path, "rb") as f:
        head = f.read(len(HEADER))
        if len(head) < len(HEADER) or head[:8] != HEADER[:8]:
            raise ValueError(f"{path}: not a job step series (bad header)")
        (size, _flags) = struct.unpack("<II", head[8:])
        if size != RECORD_BYTES:
            raise ValueError(f"{path}: records of {size} bytes, this mlprof reads {RECORD_BYTES}")
        body = f.read()
    whole = len(body) - len(body) % RECORD_BYTES
    values = array("q")
    values.frombytes(body[:whole])
    if sys.byteorder != "little":
        values.byteswap()
    return [tuple(values[i:i + _N]) for i in range(0, len(values), _N)]
