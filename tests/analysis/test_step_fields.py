"""A step's two views are named once (mlprof.analysis.steps): HOST_FIELDS and DEVICE_FIELDS each partition
the step, and the comparison and the pages take their columns and labels from there (ui/api.py wrote the
device view's labels by hand, compare.py its fields, ui/compare_view.py the host fields' phases)."""

from __future__ import annotations

from shared_data import H200_TRACE

from mlprof.analysis.compare import compare
from mlprof.analysis.steps import DEVICE_FIELDS, HOST_FIELDS, step_breakdown
from mlprof.parse import ParseOptions, parse_path
from mlprof.tables.store import TableStore
from mlprof.ui.api import PHASES
from mlprof.ui.compare_view import _HOST_BREAKDOWN


def test_each_view_partitions_the_step_and_every_surface_names_it_from_one_place(tmp_path):
    (result,) = parse_path(H200_TRACE, ParseOptions(output_dir=tmp_path / "out"))
    with TableStore(result.tables_dir) as store:
        steps = step_breakdown(store)
        rows = compare(store, store).breakdown
    assert steps and all(sum(getattr(s, f) for f in DEVICE_FIELDS) == s.dur_ns
                         == sum(getattr(s, f) for f in HOST_FIELDS.values()) for s in steps)
    device_rows = {r.name for r in rows if r.detail.get("view") == "device"}
    assert device_rows and device_rows <= {f.removesuffix("_ns") for f in DEVICE_FIELDS}
    assert [p[:2] for p in PHASES["device"]] == [list(x) for x in DEVICE_FIELDS.items()]
    assert {_HOST_BREAKDOWN[r.name] for r in rows if r.detail.get("view") == "host"} <= set(HOST_FIELDS)
