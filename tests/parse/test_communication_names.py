"""A name means the same thing to the phases, the cluster analysis and the advisor (mlprof.tables.names)."""

from __future__ import annotations

import pytest

from mlprof.analysis.advisor import advise
from mlprof.analysis.cluster_data import extract_rank

from .conftest import parse_one, write_trace
from .test_golden import X


def _step(tmp_path, op: str, start_us: float, dur_us: float, cat: str = "cpu_op"):
    # A 100 us step: an aten op until ``start_us``, then ``op``.
    events = [X("ProfilerStep#1", 0.0, 100.0, cat="user_annotation"), X("aten::mm", 0.0, start_us),
              X(op, start_us, dur_us, cat=cat)]
    store, _ = parse_one(write_trace(tmp_path / "t.json", events), tmp_path / "out")
    return store


def _host_phase_ns(store, phase: str) -> int:
    return store.rows("SELECT coalesce(sum(dur_ns), 0) FROM phase_spans WHERE view = 'host' AND phase = ?",
                      [phase])[0][0]


# An annotation's words name a phase too (all_reduce): send and a cpu_op test the name itself.
@pytest.mark.parametrize("op, cat", [("hccl:send", "user_annotation"), ("hccl:allreduce", "cpu_op"),
                                     ("nccl:recv", "user_annotation"), ("gloo:all_reduce", "user_annotation"),
                                     ("xccl:send", "user_annotation")])
def test_a_backend_collective_is_communication_in_phases_and_cluster(tmp_path, op, cat):
    with _step(tmp_path, op, 40.0, 20.0, cat) as store:
        assert _host_phase_ns(store, "communication") == 20_000
        rank = extract_rank(store, "t")
    assert rank["identity"]["communicates"] and rank["comm_kind"] == "host"
    assert [o["name"] for o in rank["comm_ops"]] == [op]


def test_torch_npu_hccl_op_is_communication_not_the_dominant_op(tmp_path):
    # torch_npu's HcclAllreduce on the step's thread: communication, never reported as the model's slowest op.
    with _step(tmp_path, "HcclAllreduce", 10.0, 90.0) as store:
        assert _host_phase_ns(store, "communication") == 90_000
        findings = advise(store).findings
    assert not [f for f in findings if f.id == "dominant_op" and "HcclAllreduce" in str(f.to_dict())]


def test_data_loading_is_one_definition_for_phases_and_advisor(tmp_path):
    # A loader op that is not torch's enumerate(DataLoader): data loading to the phases, so the advisor
    # neither calls it the dominant op nor leaves it out of the input-pipeline finding's loaders.
    loader = "MyDataLoader.__next__#_SingleProcessDataLoaderIter"
    with _step(tmp_path, loader, 20.0, 80.0) as store:
        assert _host_phase_ns(store, "data_loading") == 80_000
        findings = advise(store).findings
    assert not [f for f in findings if f.id == "dominant_op" and "MyDataLoader" in str(f.to_dict())]
    (loading,) = [f for f in findings if f.id == "data_loading"]
    assert [op["name"] for op in loading.evidence.ops] == [loader]
    assert loading.evidence.metrics["single_process_loader"] is True
