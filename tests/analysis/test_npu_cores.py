"""NPU time by compute unit and its pipes, against kernel_details.csv and the SQLite export on real torch_npu output."""

from __future__ import annotations

import csv
from collections import defaultdict
from decimal import Decimal

import pytest

from mlprof.analysis.npu_cores import npu_core_split
from mlprof.parse import ParseOptions, parse_path
from mlprof.tables.store import TableStore
from shared_data import SHARED_ASCEND, SHARED_TRACES


def _rank_dir(level: str, rank: int = 0):
    return SHARED_ASCEND / level / f"rank{rank}_ascend_pt"


@pytest.fixture(scope="module")
def parsed(tmp_path_factory):
    if not SHARED_ASCEND.is_dir():
        pytest.skip(f"shared Ascend data not found at {SHARED_ASCEND}")
    stores: dict = {}

    def get(level: str) -> TableStore:
        if level not in stores:
            result = parse_path(_rank_dir(level), ParseOptions(output_dir=tmp_path_factory.mktemp("npu")))[0]
            assert result.error is None, result.error
            stores[level] = TableStore(result.tables_dir)
        return stores[level]

    yield get
    for store in stores.values():
        store.close()


def _kernel_details(level: str) -> list[dict]:
    with open(_rank_dir(level) / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv", newline="") as fh:
        return list(csv.DictReader(fh))


def _us_to_ns(text: str) -> int:
    return int(Decimal(text) * 1000)


def _number(text: str | None) -> float | None:
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


# Copies the tool writes in trace_view.json only (not kernel_details.csv): device_ops of kind memcpy.
DMA = {"PCIE_DMA_SQE", "SDMA_SQE"}


def test_time_per_unit_equals_kernel_details_csv(parsed):
    expected: dict[str, list[int]] = defaultdict(list)
    for row in _kernel_details("text/level1"):
        expected[row["Accelerator Core"]].append(_us_to_ns(row["Duration(us)"]))
    rows = {r["core"]: r for r in npu_core_split(parsed("text/level1"))}
    assert set(rows) - DMA == set(expected)
    total = sum(r["total_ns"] for r in rows.values())
    for core, durations in expected.items():
        assert rows[core]["ops"] == len(durations), core
        assert rows[core]["total_ns"] == sum(durations), core
        assert rows[core]["ratio_pct"] == pytest.approx(100 * sum(durations) / total)
    ordered = [r["total_ns"] for r in npu_core_split(parsed("text/level1"))]
    assert ordered == sorted(ordered, reverse=True)


def test_the_extra_units_are_the_copies_of_trace_view(parsed):
    store = parsed("text/level1")
    for core in DMA & {r["core"] for r in npu_core_split(store)}:
        kinds = store.rows("""SELECT DISTINCT d.kind FROM device_ops d JOIN device_op_details x
                              USING (window_index, device_op_id) WHERE coalesce(x.accelerator_core, x.task_type) = ?""",
                           [core])
        assert kinds == [("memcpy",)], core


def test_level0_keeps_every_task_of_kernel_details_csv(parsed):
    """Level0's kernel_details.csv names no unit (N/A) but for HCCL; the tasks and their time are all there."""
    csv_rows = _kernel_details("text/level0")
    rows = [r for r in npu_core_split(parsed("text/level0")) if r["core"] not in DMA]
    assert sum(r["ops"] for r in rows) == len(csv_rows)
    assert sum(r["total_ns"] for r in rows) == sum(_us_to_ns(r["Duration(us)"]) for r in csv_rows)
    hccl = [r for r in csv_rows if r["Accelerator Core"] == "HCCL"]
    assert next(r for r in rows if r["core"] == "HCCL")["ops"] == len(hccl)


def test_pipe_shares_equal_the_counters_weighted_by_busy_time(parsed):
    """Each pipe's share: its ratio over the unit's ops, weighted by the unit's busy time (aicore_time for the
    cube core's counters, aiv_time for the vector core's), computed here straight from the CSV."""
    sums: dict[tuple[str, str, str], list[float]] = defaultdict(lambda: [0.0, 0.0])
    for row in _kernel_details("text/level1"):
        for key, value in row.items():
            for unit, busy_key in (("aic", "aicore_time(us)"), ("aiv", "aiv_time(us)")):
                if key.startswith(f"{unit}_") and key.endswith("_ratio"):
                    ratio, busy = _number(value), _number(row.get(busy_key))
                    if ratio is None or busy is None or busy <= 0:
                        continue
                    acc = sums[(row["Accelerator Core"], unit, key[4:-6])]
                    acc[0] += ratio * busy
                    acc[1] += busy
    expected = {k: num / den for k, (num, den) in sums.items() if den}
    assert expected, "the Level1 CSV has PMU counters"
    got = {(r["core"], p["unit"], p["pipe"]): p["share"] for r in npu_core_split(parsed("text/level1"))
           for p in r["pipes"]}
    assert set(got) == set(expected)
    for key, share in expected.items():
        assert got[key] == pytest.approx(share, abs=1e-4), key
    by_core = {r["core"]: r for r in npu_core_split(parsed("text/level1"))}
    # The vector core's busiest pipe decides its bound: compute (vec) or memory transfers (mte2/mte3).
    vector = by_core["AI_VECTOR_CORE"]
    vec = max(p["share"] for p in vector["pipes"] if p["pipe"] == "vec")
    memory = max(p["share"] for p in vector["pipes"] if p["pipe"] in ("mte2", "mte3"))
    assert vector["bound"] == ("memory" if memory > vec else "compute")


def test_the_sqlite_export_gives_the_same_split(parsed):
    text = {r["core"]: r for r in npu_core_split(parsed("text/level1"))}
    db = {r["core"]: r for r in npu_core_split(parsed("db/level1"))}
    # The two exports of one run hold the same tasks (different captures: the same ops, other durations).
    assert set(db) >= {"AI_CORE", "AI_VECTOR_CORE"}
    assert {c for c in db if c in text} >= {"AI_CORE", "AI_VECTOR_CORE"}
    assert all(r["pipes"] for c, r in db.items() if c in ("AI_CORE", "AI_VECTOR_CORE"))
    assert {p["pipe"] for p in db["AI_CORE"]["pipes"]} >= {"mac", "mte2"}


def test_level0_has_no_pipes_and_no_bound(parsed):
    rows = npu_core_split(parsed("text/level0"))
    assert rows and all(r["pipes"] == [] and r["bound"] is None for r in rows)


def test_a_step_keeps_only_that_step(parsed):
    store = parsed("text/level1")
    steps = [s for (s,) in store.rows("SELECT DISTINCT step FROM device_ops WHERE step IS NOT NULL ORDER BY 1")]
    whole = sum(r["total_ns"] for r in npu_core_split(store))
    per_step = sum(r["total_ns"] for s in steps for r in npu_core_split(store, s))
    outside = store.rows("""SELECT coalesce(sum(d.dur_ns), 0) FROM device_ops d
                            JOIN device_op_details x USING (window_index, device_op_id)
                            WHERE d.step IS NULL AND d.kind <> 'sync'""")[0][0]
    assert per_step + outside == whole


def test_a_kineto_trace_has_no_npu_split(tmp_path):
    trace = SHARED_TRACES / "critical_path" / "alexnet" / "benchmark_result_2869224_1695835535_trace.json.gz"
    if not trace.exists():
        pytest.skip("shared traces not available")
    result = parse_path(trace, ParseOptions(output_dir=tmp_path))[0]
    with TableStore(result.tables_dir) as store:
        assert npu_core_split(store) == []
