"""CSV exports cannot carry spreadsheet formulas or NULs (issue 12, item 15)."""

from __future__ import annotations

import csv

from mlprof.export.csv_summaries import spreadsheet_safe
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
