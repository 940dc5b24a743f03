"""CSV exports cannot carry spreadsheet formulas or NULs (issue 12, item 15); summary files are
written as their rows come, with the text of writing them whole."""

from __future__ import annotations

import csv
import io
import json

import pytest

from mlprof.capture.files import atomic_write
from mlprof.export.csv_summaries import _cell, _json_value, _render, spreadsheet_safe
from mlprof.export.summaries import Summary, SummaryColumn
from mlprof.parse import ParseOptions, parse_path
from mlprof.ui.api import rows_to_csv


def test_formula_like_text_is_quoted_and_numbers_kept():
    assert spreadsheet_safe("=1+1") == "'=1+1"
    assert spreadsheet_safe("+cmd") == "'+cmd"
    assert spreadsheet_safe("-x") == "'-x"
    assert spreadsheet_safe("@SUM(A1)") == "'@SUM(A1)"
    assert spreadsheet_safe("a\x00b") == "ab"
    assert spreadsheet_safe("-1.5") == "-1.5"
    assert spreadsheet_safe(-3) == -3
    assert rows_to_csv([{"name": "=HYPERLINK(1)", "n": 1}]) == "name,n\n'=HYPERLINK(1),1\n"


def test_exported_csv_cells_never_start_a_formula(tmp_path):
    names = ["=cmd|' /C calc'!A0", "@SUM(1)", "+1+2", "-2-3", "a\x00b"]
    events = ",".join(
        '{"ph":"X","cat":"cpu_op","name":%s,"pid":1,"tid":1,"ts":%d,"dur":5}' % (
            __import__("json").dumps(n), 10 * i) for i, n in enumerate(names))
    trace = tmp_path / "t.pt.trace.json"
    trace.write_text('{"traceEvents":[%s]}' % events)
    out = tmp_path / "out"
    parse_path(trace, ParseOptions(output_dir=out))
    from mlprof.export import ExportOptions, run_exports

    written = [p for p in run_exports(out, ExportOptions()) if p.suffix == ".csv"]
    assert written
    seen = set()
    for path in written:
        text = path.read_text()
        assert "\x00" not in text
        for row in csv.reader(text.splitlines()):
            for cell in row:
                assert not cell.startswith(("=", "+", "@")) or cell == "", (path.name, cell)
                seen.add(cell)
    assert "'=cmd|' /C calc'!A0" in seen and "ab" in seen


# Summary files are written as their rows come (kernel_details of a 10M-event GPU run held 1.9 GB
# as one list and one string): the text must be what writing them whole gave.

def _summary_rows(n: int) -> list[dict]:
    return [{"name": f"k{i}" if i % 4 else "=cmd", "start_ns": 1_700_000_000_123_456_789 + i, "dur_ns": i * 7,
             "size_bytes": None if i % 3 else i, "occupancy_pct": 12.5 + i, "is_communication": bool(i % 2)}
            for i in range(n)]


_COLUMNS = (SummaryColumn("Name", "name", "", ""), SummaryColumn("Start(us)", "start_ns", "us", ""),
            SummaryColumn("Duration(us)", "dur_ns", "us", ""), SummaryColumn("Size", "size_bytes", "bytes", ""),
            SummaryColumn("Occupancy(%)", "occupancy_pct", "%", ""),
            SummaryColumn("Communication", "is_communication", "", ""))


@pytest.mark.parametrize("n", [0, 1, 2, 3, 7, 10])
def test_summaries_written_in_chunks_read_as_written_whole(n):
    summary = Summary("t", "", _COLUMNS, lambda store, step: [])
    rows = _summary_rows(n)
    expected_json = json.dumps([{c.name: _json_value(c, r.get(c.source)) for c in _COLUMNS} for r in rows], indent=1)
    assert "".join(_render(summary, iter(rows), "json")) == expected_json
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow([c.name for c in _COLUMNS])
    for r in rows:
        writer.writerow([_cell(c, r.get(c.source)) for c in _COLUMNS])
    chunks = list(_render(summary, iter(rows), "csv", batch_rows=3))
    assert "".join(chunks) == buf.getvalue()
    assert len(chunks) == n // 3 + 1


def test_a_file_whose_rows_fail_midway_is_not_left_half_written(tmp_path):
    def rows():
        yield "a,b\n"
        raise RuntimeError("query failed")

    with pytest.raises(RuntimeError):
        atomic_write(tmp_path / "kernel_details.csv", rows())
    assert list(tmp_path.iterdir()) == []
