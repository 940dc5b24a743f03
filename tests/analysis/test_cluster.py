"""Cluster: a 2-rank gloo DDP job with rank 1 slowed on purpose; ranks in processes and on Dask."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from mlprof.analysis.cluster import combine
from mlprof.cluster_workflow import extract_ranks
from mlprof.workflow import cluster
from mlprof.errors import MlprofError

pytestmark = pytest.mark.torch


def test_cluster_names_the_slowed_rank(ddp_dir):
    report = cluster(ddp_dir, workers=2)
    assert [r.rank for r in report.ranks] == [0, 1] and not report.failed
    assert report.slow_ranks, "no slow rank found"
    top = report.slow_ranks[0]
    assert top.rank == 1 and top.excess_in == "compute"
    # The sleep is Python time outside ops on rank 1: that is the cause (no call site: mlprof.profile
    # without Python sampling, unlike mlprof run).
    assert top.cause == "python" and top.cause_ns > 0.5 * top.excess_ns and top.call_site is None
    # It sleeps 30 ms a step; the measured excess is about that (the other rank waits meanwhile).
    assert top.excess_ns == pytest.approx(30e6, rel=0.35)
    fast, slow = report.ranks
    # The fast rank spends the slow rank's extra time waiting in all-reduce, not transferring.
    assert fast.wait_ns > 0.5 * top.excess_ns and slow.wait_ns < fast.wait_ns
    assert fast.communication_ns == pytest.approx(fast.wait_ns + fast.transit_ns)
    colls = {(c.collective, c.rank): c for c in report.collectives}
    assert colls[("gloo:all_reduce", 0)].count == colls[("gloo:all_reduce", 1)].count > 0
    assert colls[("gloo:all_reduce", 0)].size_bytes == colls[("gloo:all_reduce", 1)].size_bytes > 0
    assert {r["rank"] for r in report.step_rows} == {0, 1}


def test_cluster_on_a_local_dask_cluster_gives_the_same_answer(ddp_dir, tmp_path):
    distributed = pytest.importorskip("distributed")
    local = cluster(ddp_dir, workers=1)
    # Raw captures only: the Dask workers do the parsing.
    fresh = tmp_path / "raw_only"
    for cap in sorted(ddp_dir.glob("*_mlprof")):
        shutil.copytree(cap, fresh / cap.name, ignore=shutil.ignore_patterns("mlprof_output"))
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as lc:
        remote = cluster(fresh, scheduler=lc.scheduler_address)
    assert all((cap / "mlprof_output" / "tables").is_dir() for cap in fresh.iterdir())
    strip = [{**r.__dict__, "source": None} for r in remote.ranks]
    assert strip == [{**r.__dict__, "source": None} for r in local.ranks]
    assert [{**s.__dict__, "source": None} for s in remote.slow_ranks] == \
        [{**s.__dict__, "source": None} for s in local.slow_ranks]


def test_cluster_cli_json(ddp_dir):
    res = subprocess.run([sys.executable, "-m", "mlprof", "cluster", str(ddp_dir), "--json"],
                         capture_output=True, text=True, timeout=240)
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    assert data["slow_ranks"][0]["rank"] == 1
    text = subprocess.run([sys.executable, "-m", "mlprof", "cluster", str(ddp_dir)], capture_output=True, text=True,
                          timeout=240)
    assert "rank 1: compute" in text.stdout


def test_a_bad_rank_is_reported_and_the_others_analysed(ddp_dir):
    bad = {"source": "rank-7.pt.trace.json", "error": "rank-7.pt.trace.json: truncated JSON"}
    report = combine(extract_ranks(ddp_dir, workers=1) + [bad])
    assert [r.rank for r in report.ranks] == [0, 1]
    assert report.failed == [bad]
    with pytest.raises(MlprofError, match="no rank could be read"):
        combine([bad])


def test_advise_over_the_ranks_files_the_slow_rank_finding_with_that_rank(ddp_dir):
    res = subprocess.run([sys.executable, "-m", "mlprof", "advise", str(ddp_dir), "--json", "--no-write"],
                         capture_output=True, text=True, timeout=240)
    assert res.returncode == 0, res.stderr
    by_rank = {r["rank"]: r for r in json.loads(res.stdout)}
    slow_ids = [f["id"] for f in by_rank[1]["findings"]]
    assert "slow_rank" in slow_ids
    slow = next(f for f in by_rank[1]["findings"] if f["id"] == "slow_rank")
    assert slow["evidence"]["metrics"]["cause"] == "python" and "Python outside ops" in slow["fix"]
    # The sleep is Python time in which no op runs: the single-rank rule sees it too.
    assert "host_outside_ops" in slow_ids
    assert not [f for f in by_rank[0]["findings"] if f["id"] == "slow_rank"]


def test_the_waiting_rank_gets_an_exposed_communication_finding(ddp_dir):
    from mlprof.analysis.advisor import advise
    from mlprof.outputs import parsed_outputs as parsed_outputs_of
    from mlprof.tables.store import TableStore

    reports = {}
    for out in parsed_outputs_of(ddp_dir):
        with TableStore(out.tables_dir) as store:
            report = advise(store)
        reports[report.rank] = {f.id: f for f in report.findings}
    # Rank 0 blocks in gloo all-reduce while rank 1 sleeps: most of its step is exposed communication.
    waiting = reports[0]["communication_overlap"]
    assert waiting.severity in ("warning", "critical") and waiting.evidence.metrics["measured_on"] == "host"
    assert waiting.share > 0.5
    # The late rank waits far less (only when noise on this shared host delays rank 0).
    late = reports[1].get("communication_overlap")
    assert late is None or late.share < waiting.share / 2
