"""A trace's decoded pieces kept on disk, for the segmented parse (:mod:`mlprof.parse.segments`).

When a trace's columns would not fit the memory budget, each piece is
written to disk as soon as it is decoded, by whichever process decoded it
(one ``.npy`` file per column, under ``<spill>/<piece>/``), and only a
manifest stays in memory: per kind of event, the row count and the range of
its times. The segmented build then loads the rows of one stretch of time
at a time.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from mlprof.errors import MlprofError
from mlprof.parse.kineto_events import KinetoColumns

__all__ = ["Spill", "SpilledTrace", "kept", "as_in_trace"]

# The column of each kind that places its rows in time.
TIME_COLUMN = {"host": "start_ns", "runtime": "start_ns", "device": "start_ns", "memory": "ts_ns",
               "flows": "ts_ns", "instants": "start_ns", "device_annotations": "start_ns", "counters": "ts_ns"}


class Spill:
    """The directory the pieces go to; removed by :meth:`remove`."""

    def __init__(self, directory: Path) -> None:
        self.dir = Path(directory)

    def piece_dir(self, index: int) -> Path:
        return self.dir / f"{index:07d}"

    def keep(self, index: int, result: dict) -> dict:
        """``result`` (a decoded piece) with its columns written to disk: ``columns`` becomes None and
        ``spilled`` maps each kind to (rows, first time, last time, column names)."""
        where = self.piece_dir(index)
        manifest = {}
        try:
            where.mkdir(parents=True, exist_ok=True)
            for kind, columns in result["columns"].items():
                for name, values in columns.items():
                    np.save(where / f"{kind}.{name}.npy", values, allow_pickle=False)
        except OSError as exc:  # in a forked worker too: an MlprofError reaches the parse as it is
            raise MlprofError(f"{exc.filename or where}: cannot write: {exc.strerror or exc}") from None
        for kind, columns in result["columns"].items():
            rows = len(next(iter(columns.values())))
            times = columns.get(TIME_COLUMN.get(kind, ""))
            manifest[kind] = (rows, int(times.min()) if rows and times is not None else None,
                              int(times.max()) if rows and times is not None else None, list(columns))
        return {**result, "columns": None, "spilled": manifest}

    def load(self, index: int, kind: str, names: list[str]) -> dict[str, np.ndarray]:
        where = self.piece_dir(index)
        return {name: np.load(where / f"{kind}.{name}.npy", allow_pickle=False) for name in names}

    def remove(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)


def as_in_trace(kind: str, name: str, values: np.ndarray, remap: np.ndarray | None, base_add: int,
                device_rows_before: int) -> np.ndarray:
    """A decoded piece's column as the whole trace holds it: string codes of the decoding process's pool
    in the trace's, times with a base written after the events added, device rows counted over the trace."""
    if remap is not None and values.dtype == np.int32:
        values = remap[values]
    if kind == "collectives" and name == "device_row":
        values = values + device_rows_before
    if base_add and name in ("start_ns", "ts_ns"):
        values = values + base_add
    return values


def kept(spill: Spill | None, index: int, result: dict) -> dict:
    """A decoded piece as the reader keeps it: in memory, or on disk with ``spill``."""
    return result if spill is None else spill.keep(index, result)


@dataclass
class SpilledTrace:
    """A trace read with its pieces on disk: what :func:`mlprof.parse.kineto_stream.columns_of` makes
    of them, less the arrays (``cols`` holds the metadata, threads and counts)."""

    spill: Spill
    pieces: list[dict]  # each piece's manifest, in file order
    remaps: dict[int, np.ndarray]  # piece -> its process's string codes in the trace's pool
    base_add: int  # added to every time column (a base written after the events)
    cols: KinetoColumns
    _bases: dict[str, np.ndarray] = field(default_factory=dict, repr=False)

    def rows_before(self, kind: str) -> np.ndarray:
        """Per piece, the rows of ``kind`` in the pieces before it (its first global row)."""
        if kind not in self._bases:
            counts = [p["spilled"][kind][0] if kind in p["spilled"] else 0 for p in self.pieces]
            self._bases[kind] = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        return self._bases[kind]

    def rows(self, kind: str) -> int:
        return int(self.rows_before(kind)[-1])

    def piece_columns(self, index: int, kind: str, names: list[str] | None = None) -> dict[str, np.ndarray]:
        """One piece's columns of ``kind``, as :func:`columns_of` would have merged them (string codes in
        the trace's pool, times with the base added, device rows numbered over the whole trace)."""
        names = names or self.pieces[index]["spilled"][kind][3]
        device_rows = int(self.rows_before("device")[index]) if kind == "collectives" else 0
        return {name: as_in_trace(kind, name, values, self.remaps.get(index), self.base_add, device_rows)
                for name, values in self.spill.load(index, kind, names).items()}

    def columns(self, kind: str, pieces: list[int] | None = None,
                names: list[str] | None = None) -> dict[str, np.ndarray]:
        """The columns of ``kind`` of ``pieces`` (default: every piece holding some), stacked in file order."""
        pieces = self.overlapping(kind, None, None) if pieces is None else pieces
        parts = [self.piece_columns(index, kind, names) for index in pieces]
        return {name: np.concatenate([p[name] for p in parts]) for name in parts[0]} if parts else {}

    def overlapping(self, kind: str, lo: int | None, hi: int | None) -> list[int]:
        """Pieces with rows of ``kind`` whose times may lie in [lo, hi) (None: unbounded)."""
        out = []
        for index, piece in enumerate(self.pieces):
            if kind not in piece["spilled"] or not piece["spilled"][kind][0]:
                continue
            _, first, last, _ = piece["spilled"][kind]
            if first is not None and ((hi is not None and first + self.base_add >= hi)
                                      or (lo is not None and last + self.base_add < lo)):
                continue
            out.append(index)
        return out
