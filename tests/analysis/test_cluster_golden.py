"""Cluster figures on two tiny inline ranks with known times, and the CLI run in-process."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from mlprof.analysis.cluster import combine
from mlprof.analysis.cluster_data import extract_rank
from mlprof.analysis.op_analyse import op_analysis
from mlprof.cli.main import main
from mlprof.outputs import parsed_outputs
from mlprof.workflow import advise as advise_path
from mlprof.workflow import cluster, op_analyse
from trace_events import BASE_NS, X


def _rank_trace(path: Path, rank: int | None, compute_us: int, comm_start_us: int) -> None:
    """One 6 ms step: compute on the main thread, then a gloo all-reduce (on gloo's thread) ending at 5 ms."""
    events = [X("ProfilerStep#1", 0, 6_000, cat="user_annotation"),
              X("aten::addmm", 0, compute_us, **{"Input Dims": [[4], [4, 4], [4, 4]]}),
              X("gloo:all_reduce", comm_start_us, 5_000 - comm_start_us, cat="user_annotation", tid=99,
                **{"Input Dims": [[1000]], "Input type": ["float"]})]
    doc = {"schemaVersion": 1, "baseTimeNanoseconds": BASE_NS, "traceEvents": events}
    if rank is not None:
        doc["distributedInfo"] = {"rank": rank, "world_size": 2, "backend": "gloo"}
    path.write_text(json.dumps(doc))


@pytest.fixture
def two_ranks(tmp_path) -> Path:
    # Rank 1 computes 4 ms and arrives late; rank 0 computes 1 ms and waits 3 ms for it.
    _rank_trace(tmp_path / "rank0.pt.trace.json", 0, 1_000, 1_000)
    _rank_trace(tmp_path / "rank1.pt.trace.json", 1, 4_000, 4_000)
    return tmp_path


def test_wait_transit_and_slow_rank_are_exact(two_ranks):
    report = cluster(two_ranks, workers=1)
    r0, r1 = report.ranks
    assert (r0.rank, r1.rank) == (0, 1)
    assert r0.communication_ns == 4_000_000 and r0.wait_ns == 3_000_000 and r0.transit_ns == 1_000_000
    assert r1.communication_ns == 1_000_000 and r1.wait_ns == 0 and r1.transit_ns == 1_000_000
    assert (r0.compute_ns, r1.compute_ns) == (2_000_000, 5_000_000)
    (slow,) = report.slow_ranks
    assert slow.rank == 1 and slow.excess_in == "compute" and slow.excess_ns == 3_000_000
    assert slow.share_of_step == pytest.approx(0.5) and slow.severity == "critical"
    c0 = {c.rank: c for c in report.collectives}
    assert c0[0].size_bytes == c0[1].size_bytes == 4_000  # 1000 floats
    assert c0[1].bandwidth_gb_per_s == pytest.approx(4_000 / 1_000_000)


def test_the_analyses_take_tables_and_the_workflow_takes_paths(two_ranks):
    """Parsed once, the ranks' tables alone give the report that mlprof.cluster(path) gives."""
    ranks = []
    for out in parsed_outputs(two_ranks):
        with out.open() as store:
            ranks.append(extract_rank(store, out.source, out.output_dir))
            if out.source.endswith("rank1.pt.trace.json"):
                groups = op_analysis(store, ["addmm"])["addmm"]
                assert op_analyse(out.source, ["addmm"]) == {"addmm": [g.to_dict() for g in groups]}
    by_tables = combine(ranks)
    assert by_tables == cluster(two_ranks, workers=1)
    assert [r.rank for r in by_tables.ranks] == [0, 1] and by_tables.slow_ranks[0].rank == 1


def test_ranks_in_several_directories_are_one_cluster(two_ranks, tmp_path_factory, capsys):
    """Ranks copied from two nodes into two folders: the same report as from one folder; a rank named twice
    counts once."""
    node0, node1 = tmp_path_factory.mktemp("node0"), tmp_path_factory.mktemp("node1")
    (node0 / "rank0.pt.trace.json").write_bytes((two_ranks / "rank0.pt.trace.json").read_bytes())
    (node1 / "rank1.pt.trace.json").write_bytes((two_ranks / "rank1.pt.trace.json").read_bytes())
    split = cluster([node0, node1, node1 / "rank1.pt.trace.json"], workers=1)
    assert [r.rank for r in split.ranks] == [0, 1] and split.slow_ranks[0].rank == 1
    whole = cluster(two_ranks, workers=1)
    assert [replace(r, source="") for r in split.ranks] == [replace(r, source="") for r in whole.ranks]
    assert main(["cluster", str(node0), str(node1), "--json", "--workers", "1"]) == 0
    assert [r["rank"] for r in json.loads(capsys.readouterr().out)["ranks"]] == [0, 1]


def test_cli_in_process(two_ranks, capsys):
    assert main(["cluster", str(two_ranks), "--json", "--workers", "1"]) == 0
    assert json.loads(capsys.readouterr().out)["slow_ranks"][0]["rank"] == 1
    assert main(["advise", str(two_ranks), "--json"]) == 0
    reports = {r["rank"]: r for r in json.loads(capsys.readouterr().out)}
    assert "slow_rank" in [f["id"] for f in reports[1]["findings"]]
    assert "communication_overlap" in [f["id"] for f in reports[0]["findings"]]
    a, b = sorted(two_ranks.glob("*.pt.trace.json"))
    assert main(["compare", str(a), str(b), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["step_time"]["delta_ns"] == 0
    assert main(["op", str(b), "--name", "addmm", "--json"]) == 0
    (group,) = json.loads(capsys.readouterr().out)["addmm"]
    assert group["occurrences"] == 1 and group["host_total_ns"] == 4_000_000
    assert main(["op", str(two_ranks), "--name", "addmm"]) == 0  # two ranks: one table each
    assert capsys.readouterr().out.count("aten::addmm") == 2


def test_slow_rank_finding_goes_to_the_right_trace_when_ranks_are_unknown(tmp_path):
    _rank_trace(tmp_path / "a.pt.trace.json", None, 1_000, 1_000)
    _rank_trace(tmp_path / "b.pt.trace.json", None, 4_000, 4_000)
    reports = {Path(r.source).name: [f.id for f in r.findings] for r in advise_path(tmp_path)}
    assert "slow_rank" in reports["b.pt.trace.json"] and "slow_rank" not in reports["a.pt.trace.json"]


def test_advise_cannot_write_is_a_one_line_error(two_ranks, capsys, monkeypatch):
    import mlprof.workflow

    def refuse(path, data):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(mlprof.workflow, "atomic_write", refuse)
    assert main(["advise", str(two_ranks)]) != 0
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "advisor.json" in err and "--no-write" in err
    assert main(["advise", str(two_ranks), "--no-write"]) == 0
