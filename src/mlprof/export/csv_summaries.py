"""Presenter of the summary files as CSV (default) or JSON (--summary-format json)."""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Iterable, Iterator
from pathlib import Path

from mlprof.export.summaries import SUMMARIES, Summary, SummaryColumn
from mlprof.capture.files import atomic_write
from mlprof.tables.store import TableStore

__all__ = ["write_summaries", "format_us", "spreadsheet_safe"]


def format_us(ns) -> str:
    """ns (int or float) as µs with exactly three decimals; '' for NULL."""
    if ns is None:
        return ""
    value = int(round(ns))
    sign = "-" if value < 0 else ""
    value = abs(value)
    return f"{sign}{value // 1000}.{value % 1000:03d}"


_NUMBER = re.compile(r"-?\d+(\.\d+)?([eE][-+]?\d+)?")
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def spreadsheet_safe(value) -> object:
    """A CSV cell that a spreadsheet will not run: NULs stripped, and text that
    starts like a formula (= + - @, tab, CR) prefixed with ' (numbers kept)."""
    if not isinstance(value, str):
        return value
    value = value.replace("\x00", "")
    if value.startswith(_FORMULA_START) and not _NUMBER.fullmatch(value):
        return "'" + value
    return value


def _cell(col: SummaryColumn, value) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return spreadsheet_safe(value)
    if col.unit == "us":
        return format_us(value)
    if col.unit == "%":
        return f"{value:.2f}"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _json_value(col: SummaryColumn, value):
    if value is None:
        return None
    if col.unit == "us":
        return float(format_us(value))
    if col.unit == "%":
        return round(float(value), 4)
    return value


def _render(summary: Summary, rows: Iterable[dict], fmt: str, batch_rows: int = 10_000) -> Iterator[str]:
    """The file's text in chunks, as ``rows`` come (as json.dumps(list, indent=1) would write it whole)."""
    if fmt == "json":
        first = True
        yield "["
        for r in rows:
            text = json.dumps({c.name: _json_value(c, r.get(c.source)) for c in summary.columns}, indent=1,
                              default=str)
            yield ("\n " if first else ",\n ") + text.replace("\n", "\n ")
            first = False
        yield "]" if first else "\n]"
        return
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow([c.name for c in summary.columns])
    for n, r in enumerate(rows, 1):
        writer.writerow([_cell(c, r.get(c.source)) for c in summary.columns])
        if n % batch_rows == 0:
            yield buf.getvalue()
            buf.seek(0)
            buf.truncate()
    yield buf.getvalue()


def write_summaries(store: TableStore, out_dir: Path, fmt: str = "csv", step: int | None = None) -> list[Path]:
    """Write every summary file into ``out_dir``; returns the paths written."""
    return [atomic_write(out_dir / f"{summary.stem}.{fmt}", _render(summary, summary.rows(store, step), fmt))
            for summary in SUMMARIES]
