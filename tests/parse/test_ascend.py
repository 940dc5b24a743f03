"""The Ascend importer against the Ascend tool's own summaries, on real torch_npu output.

Every imported total must equal what torch_npu's summary files say about the
same data (step_trace_time.csv, op_statistic.csv, kernel_details.csv,
communication.json; for the SQLite export, analysis.db), within 0.1%.
"""

from __future__ import annotations

import csv
import json
import shutil
import sqlite3
import subprocess
import sys
from decimal import Decimal

import pytest

from mlprof.errors import CaptureError, TraceFormatError
from mlprof.parse import ParseOptions, parse_path
from mlprof.parse.ascend_common import AscendInput, us_text_to_ns
from mlprof.parse.capture_reader import find_inputs
from mlprof.tables.schema import TABLES
from mlprof.tables.store import TableStore
from shared_data import SHARED_ASCEND

TEXT = [("text/level1", 0), ("text/level1", 1), ("text/level0", 0), ("text/level0", 1)]
DB = [("db/level1", 0), ("db/level1", 1)]
TOLERANCE = 1e-3  # 0.1%


def rank_dir(level: str, rank: int):
    return SHARED_ASCEND / level / f"rank{rank}_ascend_pt"


@pytest.fixture(scope="module")
def parsed(tmp_path_factory):
    if not SHARED_ASCEND.is_dir():
        pytest.skip(f"shared Ascend data not found at {SHARED_ASCEND}")
    cache: dict = {}

    def get(level: str, rank: int) -> TableStore:
        if (level, rank) not in cache:
            out = tmp_path_factory.mktemp("ascend")
            result = parse_path(rank_dir(level, rank), ParseOptions(output_dir=out))[0]
            assert result.kind == f"ascend_{level.split('/')[0]}"
            cache[(level, rank)] = TableStore(result.tables_dir)
        return cache[(level, rank)]

    yield get
    for store in cache.values():
        store.close()


def close(ours: float, theirs: float, abs_ns: float = 10.0) -> bool:
    return abs(ours - theirs) <= max(abs(theirs) * TOLERANCE, abs_ns)


def union(spans: list[tuple[int, int]]) -> int:
    total, cur_s, cur_e = 0, None, None
    for s, e in sorted(spans):
        if cur_e is None or s > cur_e:
            total += (cur_e - cur_s) if cur_e is not None else 0
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    return total + ((cur_e - cur_s) if cur_e is not None else 0)


def device_view(store: TableStore, step: int) -> dict[str, int]:
    """The Ascend tool's step figures computed from our tables: kernels only (its Computing
    leaves out DMA copies), communication = HCCL ops, preparing = step start to first kernel."""
    start, = store.rows("SELECT start_ns FROM steps WHERE step = ?", [step])[0]
    rows = store.rows("SELECT start_ns, start_ns + dur_ns, is_communication FROM device_ops "
                      "WHERE kind = 'kernel' AND step = ?", [step])
    comp = [(s, e) for s, e, c in rows if not c]
    comm = [(s, e) for s, e, c in rows if c]
    overlapped = union(comp) + union(comm) - union(comp + comm)
    # The tool's Stage runs from the step's first kernel to its last one; Free is the rest of it.
    stage = max(r[1] for r in rows) - min(r[0] for r in rows)
    return {"Computing": union(comp), "Communication": union(comm), "Overlapped": overlapped,
            "Communication(Not Overlapped)": union(comm) - overlapped,
            "Preparing": min(r[0] for r in rows) - start, "Stage": stage,
            "Free": stage - union(comp) - (union(comm) - overlapped)}


def csv_rows(level: str, rank: int, name: str) -> list[dict]:
    with open(rank_dir(level, rank) / "ASCEND_PROFILER_OUTPUT" / name, newline="") as fh:
        return list(csv.DictReader(fh))


def analysis_db(rank: int, query: str) -> list[tuple]:
    path = rank_dir("db/level1", rank) / "ASCEND_PROFILER_OUTPUT" / "analysis.db"
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return con.execute(query).fetchall()
    finally:
        con.close()


@pytest.mark.parametrize("level,rank", TEXT)
def test_step_figures_equal_step_trace_time_csv(parsed, level, rank):
    store = parsed(level, rank)
    for row in csv_rows(level, rank, "step_trace_time.csv"):
        ours = device_view(store, int(row["Step"]))
        for key, value in ours.items():
            theirs = float(row[key]) * 1000
            assert close(value, theirs), (key, value, theirs)


@pytest.mark.parametrize("rank", [0, 1])
def test_db_step_figures_equal_analysis_db(parsed, rank):
    store = parsed("db/level1", rank)
    for step, computing, comm_no, overlapped, comm, preparing, free, stage in analysis_db(
            rank, "SELECT step, computing, communication_not_overlapped, overlapped, communication, preparing, "
                  "free, stage FROM StepTraceTime"):
        ours = device_view(store, int(step))
        theirs = {"Computing": computing, "Communication(Not Overlapped)": comm_no, "Overlapped": overlapped,
                  "Communication": comm, "Preparing": preparing, "Free": free, "Stage": stage}
        for key, value in theirs.items():
            assert close(ours[key], value * 1000), (key, ours[key], value * 1000)


@pytest.mark.parametrize("level,rank", TEXT + DB)
def test_step_breakdown_communication_matches_the_tool(parsed, level, rank):
    from mlprof.analysis.steps import step_breakdown

    store = parsed(level, rank)
    (b,) = step_breakdown(store)
    assert close(b.communication_ns, device_view(store, b.step)["Communication"])
    assert b.computing_ns + b.communication_not_overlapped_ns + b.preparing_ns + b.free_ns == b.dur_ns


@pytest.mark.parametrize("rank", [0, 1])
def test_op_types_equal_op_statistic_csv(parsed, rank):
    store = parsed("text/level1", rank)
    ours = {(t, c): (n, total) for t, c, n, total in store.rows(
        "SELECT x.op_type, x.accelerator_core, count(*), sum(d.dur_ns) FROM device_ops d "
        "JOIN device_op_details x USING (device_op_id) WHERE x.source = 'kernel_details.csv' "
        "AND NOT d.is_communication GROUP BY 1, 2")}
    theirs = csv_rows("text/level1", rank, "op_statistic.csv")  # computing ops only
    assert len(theirs) == len(ours)
    for row in theirs:
        n, total = ours[(row["OP Type"], row["Core Type"])]
        assert n == int(row["Count"]), row
        assert close(total, float(row["Total Time(us)"]) * 1000), row


@pytest.mark.parametrize("level,rank", TEXT)
def test_device_ops_equal_kernel_details_csv_exactly(parsed, level, rank):
    store = parsed(level, rank)
    rows = csv_rows(level, rank, "kernel_details.csv")
    by_core: dict = {}
    for r in rows:
        core = r.get("Accelerator Core", "N/A")
        n, total = by_core.get(core, (0, 0))
        by_core[core] = (n + 1, total + us_text_to_ns(r["Duration(us)"]))
    ours = dict(((c if c is not None else "N/A"), (n, t)) for c, n, t in store.rows(
        "SELECT x.accelerator_core, count(*), sum(d.dur_ns) FROM device_ops d JOIN device_op_details x "
        "USING (device_op_id) WHERE x.source = 'kernel_details.csv' GROUP BY 1"))
    assert ours == by_core
    # The float sum the tool's users would compute agrees too.
    float_sum = sum(float(r["Duration(us)"]) for r in rows) * 1000
    assert close(sum(t for _, t in ours.values()), float_sum)


@pytest.mark.parametrize("rank", [0, 1])
def test_collectives_equal_communication_json(parsed, rank):
    store = parsed("text/level1", rank)
    path = rank_dir("text/level1", rank) / "ASCEND_PROFILER_OUTPUT" / "communication.json"
    doc = json.loads(path.read_text())
    ours = {name: (start, dur, group) for name, start, dur, group in
            store.rows("SELECT name, start_ns, dur_ns, group_name FROM collectives")}
    seen = 0
    for step in doc.values():
        for key, op in step["collective"].items():
            if "@" not in key:  # "Total Op Info": the tool's sum over the ops
                continue
            name, _, group = key.partition("@")
            start, dur, our_group = ours[name]
            info = op["Communication Time Info"]
            assert close(dur, info["Elapse Time(ms)"] * 1e6), name
            assert abs(start - info["Start Timestamp(us)"] * 1000) < 1000, name
            assert our_group == group
            seen += 1
    assert seen == len(ours) == 4


@pytest.mark.parametrize("rank", [0, 1])
def test_db_collectives_equal_analysis_db(parsed, rank):
    store = parsed("db/level1", rank)
    ours = dict(store.rows("SELECT name, dur_ns FROM collectives"))
    theirs = analysis_db(rank, "SELECT hccl_op_name, elapse_time FROM CommAnalyzerTime")
    assert len(theirs) == len(ours) == 4
    for name, elapse_ms in theirs:
        assert close(ours[name], elapse_ms * 1e6), name


def test_string_timestamps_become_exact_ns(parsed):
    store = parsed("text/level1", 0)
    # trace_view.json: ProfilerStep#50 "ts": "1736408883686740.710", "dur": 155985.8
    assert store.rows("SELECT step, start_ns, dur_ns FROM steps") == [(50, 1736408883686740710, 155985800)]
    # kernel_details.csv: trans_TransData_0 at "1736408883704643.212\t" for 53.741 us
    assert store.rows("SELECT start_ns, dur_ns FROM device_ops WHERE name = 'trans_TransData_0'") == \
        [(1736408883704643212, 53741)]
    assert us_text_to_ns("1736408883704643.2125") == 1736408883704643212  # half-even below 1 ns
    assert us_text_to_ns("N/A") is None


@pytest.mark.parametrize("level,rank", TEXT + DB)
def test_every_kind_of_data_lands_in_tables(parsed, level, rank):
    store = parsed(level, rank)
    meta = dict(store.rows("SELECT key, value_json FROM metadata"))
    assert json.loads(meta["capture.rank"]) == rank
    assert json.loads(meta["device_type"]) == "npu"
    assert "profiler_metadata.environment" in meta
    assert store.count("host_ops") > 1000
    if level != "text/level0":  # level0 records no CANN layer
        assert store.count("runtime_calls") > 100
    assert store.count("memory_events") > 100
    # Kernels hang off the framework (aten) op that launched them.
    linked = store.rows("SELECT count(*) FILTER (WHERE h.name LIKE 'aten::%'), count(*) FROM device_ops d "
                        "JOIN host_ops h ON h.op_id = d.host_op_id WHERE d.kind = 'kernel'")[0]
    assert linked[0] > 0.8 * linked[1] > 100
    assert store.count("collectives") == 4
    assert store.rows("SELECT DISTINCT collective_name, dtype, size_bytes > 0 FROM collectives") == \
        [("allreduce", "float32", True)]
    if level != "text/level0":
        assert store.count("device_op_metrics") > 1000  # PMU counters of aic_metrics


@pytest.mark.parametrize("rank", [0, 1])
def test_text_and_db_exports_give_the_same_tables(parsed, rank):
    """Same rank, same level; the two exports come from two runs of the job, so the
    tables must agree in shape and content (ops, kernels, collectives), not in timestamps."""
    text, db = parsed("text/level1", rank), parsed("db/level1", rank)
    for name, schema in TABLES.items():
        cols = [d[0] for d in text.sql(f'SELECT * FROM "{name}" LIMIT 0').description]
        assert cols == [d[0] for d in db.sql(f'SELECT * FROM "{name}" LIMIT 0').description] \
            == list(schema.column_names)
    same = [
        "SELECT step FROM steps",
        "SELECT name, category, count(*) FROM host_ops WHERE category <> 'python_function' GROUP BY ALL",
        "SELECT kind, is_communication, count(*) FROM device_ops GROUP BY ALL",
        "SELECT x.op_type, x.accelerator_core, count(*) FROM device_ops d JOIN device_op_details x "
        "USING (device_op_id) WHERE d.kind = 'kernel' GROUP BY ALL",
        "SELECT collective_name, dtype, in_nelems, size_bytes, group_size FROM collectives",
        "SELECT h.name, count(*) FROM device_ops d JOIN host_ops h ON h.op_id = d.host_op_id GROUP BY ALL",
        "SELECT DISTINCT metric FROM device_op_metrics WHERE metric LIKE 'aic_%ratio'",
    ]
    for query in same:
        assert sorted(text.rows(query)) == sorted(db.rows(query)), query


def test_a_folder_of_rank_folders_is_found(ascend_data):
    found = find_inputs(ascend_data / "text" / "level1")
    assert [type(f) for f in found] == [AscendInput, AscendInput]
    assert [(f.format, f.rank) for f in found] == [("text", 0), ("text", 1)]
    assert [(f.format, f.rank) for f in find_inputs(ascend_data / "db" / "level1")] == [("db", 0), ("db", 1)]
    # Pointing at the rank folder's output dir or one of its files finds the rank folder.
    rank0 = ascend_data / "text" / "level0" / "rank0_ascend_pt"
    for path in (rank0, rank0 / "ASCEND_PROFILER_OUTPUT", rank0 / "ASCEND_PROFILER_OUTPUT" / "trace_view.json"):
        (found,) = find_inputs(path)
        assert isinstance(found, AscendInput) and found.path == rank0


def test_rank_folders_three_levels_down_are_found_and_parsed(ascend_data, tmp_path):
    """The job folder as torch_npu users keep it (<job>/text/level1/rank0_ascend_pt): every rank folder of
    every export, and `mlprof parse <job>` parses them (it used to find nothing and exit 3)."""
    found = find_inputs(ascend_data)
    assert [(f.path.relative_to(ascend_data).as_posix(), f.format) for f in found] == [
        (f"{level}/rank{rank}_ascend_pt", level.split("/")[0]) for level, rank in sorted(DB + TEXT)]
    job = tmp_path / "alexnet"
    shutil.copytree(ascend_data / "db" / "level1" / "rank1_ascend_pt", job / "db" / "level1" / "rank1_ascend_pt")
    r = subprocess.run([sys.executable, "-m", "mlprof", "parse", "--tables-only", "--json", str(job)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    (entry,) = json.loads(r.stdout)
    assert entry["kind"] == "ascend_db" and not entry.get("error")
    assert (job / "db" / "level1" / "rank1_ascend_pt" / "mlprof_output").is_dir()


def _copy_rank(ascend_data, tmp_path, level="text/level1"):
    dst = tmp_path / "rank0_ascend_pt"
    shutil.copytree(ascend_data / level / "rank0_ascend_pt", dst)
    return dst


@pytest.mark.parametrize("damage,error,named", [
    ("truncate kernel_details.csv", TraceFormatError, "kernel_details.csv"),
    ("remove kernel_details.csv", CaptureError, "kernel_details.csv"),
    ("truncate trace_view.json", TraceFormatError, "trace_view.json"),
    ("bad ts trace_view.json", TraceFormatError, "trace_view.json"),
])
def test_bad_text_export_is_an_error_naming_the_file(ascend_data, tmp_path, damage, error, named):
    root = _copy_rank(ascend_data, tmp_path)
    path = root / "ASCEND_PROFILER_OUTPUT" / named
    data = path.read_bytes()
    if damage.startswith("truncate"):
        path.write_bytes(data[: len(data) // 2])
    elif damage.startswith("remove"):
        path.unlink()
    else:
        path.write_bytes(data.replace(b'"ts": "1736408883686740.710"', b'"ts": "soon"', 1))
    with pytest.raises(error, match=named) as info:
        parse_path(root, ParseOptions(output_dir=tmp_path / "out"))
    assert "\n" not in str(info.value)


def test_corrupt_db_is_an_error_naming_the_file(ascend_data, tmp_path):
    root = _copy_rank(ascend_data, tmp_path, "db/level1")
    db = root / "ASCEND_PROFILER_OUTPUT" / "ascend_pytorch_profiler_0.db"
    db.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(TraceFormatError, match="ascend_pytorch_profiler_0.db"):
        parse_path(root, ParseOptions(output_dir=tmp_path / "out"))


def test_exact_us_to_ns_conversion_needs_no_floats():
    assert us_text_to_ns("1736408883732241.563\t") == 1736408883732241563
    assert us_text_to_ns("0.6") == 600
    assert us_text_to_ns(str(Decimal("79089.52021875"))) == 79089520
    with pytest.raises(TraceFormatError, match="kernel_details.csv"):
        us_text_to_ns("12:00", "kernel_details.csv")


@pytest.mark.parametrize("rank", [0, 1])
def test_runtime_calls_equal_api_statistic_csv(parsed, rank):
    store = parsed("text/level1", rank)
    ours = {(cat.removeprefix("cann_"), name.split("@", 1)[1]): (n, total) for name, cat, n, total in store.rows(
        "SELECT name, category, count(*), sum(dur_ns) FROM runtime_calls GROUP BY ALL")}
    theirs = csv_rows("text/level1", rank, "api_statistic.csv")
    assert len(theirs) == len(ours)
    for row in theirs:
        n, total = ours[(row["Level"], row["API Name"])]
        assert n == int(row["Count"]) and close(total, float(row["Time(us)"]) * 1000), row


@pytest.mark.parametrize("level,rank", TEXT)
def test_host_ops_equal_operator_details_csv(parsed, level, rank):
    """Count and total host time per op name (self times differ by definition: mlprof also
    subtracts the runtime calls and task-queue ops nested in an op)."""
    store = parsed(level, rank)
    theirs: dict = {}
    for row in csv_rows(level, rank, "operator_details.csv"):
        n, total = theirs.get(row["Name"], (0, 0.0))
        theirs[row["Name"]] = (n + 1, total + float(row["Host Total Duration(us)"]) * 1000)
    ours = {name: (n, total) for name, n, total in store.rows(
        "SELECT name, count(*), sum(dur_ns) FROM host_ops WHERE category = 'cpu_op' GROUP BY 1")}
    for name, (n, total) in theirs.items():
        assert ours[name][0] == n and close(ours[name][1], total), name
    assert set(ours) - set(theirs) <= {name for name in ours if name.startswith("ProfilerStep#")}


@pytest.mark.parametrize("level,rank", TEXT)
def test_memory_equals_operator_memory_and_memory_record_csv(parsed, level, rank):
    store = parsed(level, rank)
    rows = csv_rows(level, rank, "operator_memory.csv")
    allocs = store.rows("SELECT count(*), sum(size_bytes) FROM memory_events WHERE size_bytes > 0")[0]
    assert allocs[0] == len(rows)
    assert close(allocs[1], sum(float(r["Size(KB)"]) * 1024 for r in rows), abs_ns=1)
    frees = store.rows("SELECT count(*) FROM memory_events WHERE size_bytes < 0")[0][0]
    assert frees == sum(1 for r in rows if r["Release Time(us)"].strip())
    peak = max(float(r["Allocation Total Allocated(MB)"]) for r in rows) * 2**20
    assert close(store.rows("SELECT max(total_allocated_bytes) FROM memory_events")[0][0], peak, abs_ns=1)
    records = csv_rows(level, rank, "memory_record.csv")
    reserved = store.rows("SELECT count(*), max(value) FROM counters WHERE series = 'reserved_bytes'")[0]
    assert reserved[0] == sum(1 for r in records if r["Total Reserved(MB)"].strip())
    assert close(reserved[1], max(float(r["Total Reserved(MB)"] or 0) for r in records) * 2**20, abs_ns=1)


def test_wrongly_typed_args_are_an_error_naming_the_file(ascend_data, tmp_path):
    root = _copy_rank(ascend_data, tmp_path)
    path = root / "ASCEND_PROFILER_OUTPUT" / "trace_view.json"
    events = json.loads(path.read_text())
    task = next(e for e in events if e.get("args", {}).get("Task Type") == "AI_CORE")
    task["args"]["Task Id"] = [1, 2]
    events.append({"ph": "X", "name": "no args", "pid": task["pid"], "tid": 2, "ts": "1.000", "dur": 1})
    path.write_text(json.dumps(events))
    with pytest.raises(TraceFormatError, match="trace_view.json.*bad args"):
        parse_path(root, ParseOptions(output_dir=tmp_path / "out"))


def test_a_bad_number_in_a_csv_is_an_error_naming_the_folder(ascend_data, tmp_path):
    root = _copy_rank(ascend_data, tmp_path)
    path = root / "ASCEND_PROFILER_OUTPUT" / "operator_memory.csv"
    with open(path, newline="") as fh:
        rows = list(csv.reader(fh))
    rows[1][rows[0].index("Size(KB)")] = "lots"
    with open(path, "w", newline="") as fh:
        csv.writer(fh).writerows(rows)
    with pytest.raises(TraceFormatError, match="ASCEND_PROFILER_OUTPUT.*unexpected content"):
        parse_path(root, ParseOptions(output_dir=tmp_path / "out"))


@pytest.mark.parametrize("rank", [0, 1])
def test_collectives_know_their_group_s_ranks(parsed, rank):
    """communication_matrix.json (text) and analysis.db's CommAnalyzerMatrix (db) list the 8 ranks of the
    HCCL group; the collectives had no ranks, and the cluster's communication matrix was empty."""
    for level in ("text/level1", "db/level1"):
        got = parsed(level, rank).rows("SELECT DISTINCT group_ranks FROM collectives")
        assert got == [(json.dumps(list(range(8))),)], level
