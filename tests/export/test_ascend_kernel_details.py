"""mlprof's kernel_details.csv of a torch_npu run lists the tasks torch_npu's own kernel_details.csv
lists, row for row (issue 30, item 13): kernels and collectives, not the copies (MEMCPY_ASYNC:
PCIE_DMA_SQE, SDMA_SQE), not the HCCL sub-tasks, events or profiling markers; at every level
and from the text and the SQLite export alike (the SQLite one has no csv: its rank's text export
of the same job is the reference)."""

from __future__ import annotations

import csv
import re
import sqlite3
from pathlib import Path

import pytest

from mlprof.export import ExportOptions, run_exports
from mlprof.parse import ParseOptions, parse_path
from mlprof.parse.ascend_common import us_text_to_ns
from mlprof.tables.store import TableStore
from shared_data import SHARED_ASCEND

EXPORTS = [("text/level0", 0), ("text/level0", 1), ("text/level1", 0), ("text/level1", 1),
           ("db/level1", 0), ("db/level1", 1)]


def _csv(path: Path) -> list[dict]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def _tool_rows(level: str, rank: int) -> list[tuple[str, int, int]]:
    """(name, start ns, duration ns) of each row of the tool's kernel_details.csv; for the SQLite
    export, of the rows it is made from: the compute tasks (TASK with COMPUTE_TASK_INFO) and the
    collectives (COMMUNICATION_OP)."""
    folder = SHARED_ASCEND / level / f"rank{rank}_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    if level.startswith("text/"):
        return sorted((r["Name"], us_text_to_ns(r["Start Time(us)"]), us_text_to_ns(r["Duration(us)"]))
                      for r in _csv(folder / "kernel_details.csv"))
    db = next(folder.glob("ascend_pytorch_profiler_*.db"))
    con = sqlite3.connect(f"{db.as_uri()}?mode=ro&immutable=1", uri=True)
    try:
        return sorted(con.execute("""
            SELECT s.value, t.startNs, t.endNs - t.startNs FROM TASK t
            JOIN COMPUTE_TASK_INFO c USING (globalTaskId) JOIN STRING_IDS s ON s.id = c.name
            UNION ALL
            SELECT s.value, o.startNs, o.endNs - o.startNs FROM COMMUNICATION_OP o JOIN STRING_IDS s ON s.id = o.opName
            """).fetchall())
    finally:
        con.close()


def _names(rows) -> list[str]:
    # Collective names carry a number of their run (hcom_allReduce__586_0_1): not the kernel's.
    return sorted(re.sub(r"^(hcom_\w+?)__\d+_", r"\1__N_", r[0]) for r in rows)


@pytest.mark.parametrize("level, rank", EXPORTS)
def test_kernel_details_csv_has_the_tools_rows(tmp_path, level, rank):
    if not SHARED_ASCEND.is_dir():
        pytest.skip(f"shared Ascend data not found at {SHARED_ASCEND}")
    out = Path(parse_path(SHARED_ASCEND / level / f"rank{rank}_ascend_pt",
                          ParseOptions(output_dir=tmp_path / "out"))[0].output_dir)
    run_exports(out, ExportOptions())
    ours = _csv(out / "kernel_details.csv")
    theirs = _tool_rows(level, rank)
    assert sorted((r["Name"], us_text_to_ns(r["Start Time(us)"]), us_text_to_ns(r["Duration(us)"]))
                  for r in ours) == theirs
    assert {r["Type"] for r in ours} == {"kernel"}
    if level.startswith("db/"):  # the same job as the text export: the same 191 kernels by name
        assert _names(theirs) == _names(_tool_rows("text/level1", rank))
    # The copies are still device ops (the timeline and step time see them), as memcpy.
    with TableStore(out / "tables") as store:
        (copies,), = store.rows("SELECT count(*) FROM device_ops WHERE kind = 'memcpy'")
    assert copies == 24
