"""A name means the same thing to the phases, the cluster analysis and the advisor (mlprof.tables.names)."""

from __future__ import annotations

import pytest

from mlprof.analysis.advisor import advise
from mlprof.analysis.cluster_data import extract_rank

from .conftest import parse_one, write_trace
from .test_golden import X


def _one_step(tmp_path, op: str, cat: str):
    # A 100 us step: 40 us of compute, then 20 us in the collective.
    events = [X("ProfilerStep#1", 0.0, 100.0, cat="user_annotation"), X("aten::mm", 0.0, 40.0),
              X(op, 40.0, 20.0, cat=cat)]
    store, _ = parse_one(write_trace(tmp_path / "t.json", events), tmp_path / "out")
    return store


# An annotation's words name a phase too (all_reduce): send and a cpu_op test the name itself.
@pytest.mark.parametrize("op, cat", [("hccl:send", "user_annotation"), ("hccl:allreduce", "cpu_op"),
                                     ("nccl:recv", "user_annotation"), ("gloo:all_reduce", "user_annotation"),
                                     ("xccl:send", "user_annotation")])
def test_a_backend_collective_is_communication_in_phases_and_cluster(tmp_path, op, cat):
    with _one_step(tmp_path, op, cat) as store:
        phases = dict(store.rows("SELECT phase, sum(dur_ns) FROM phase_spans WHERE view = 'host' GROUP BY phase"))
        assert phases["communication"] == 20_000
        rank = extract_rank(store, "t")
    assert rank["identity"]["communicates"] and rank["comm_kind"] == "host"
    assert [o["name"] for o in rank["comm_ops"]] == [op]


def test_torch_npu_hccl_op_is_communication_not_the_dominant_op(tmp_path):
    # torch_npu's HcclAllreduce on the step's thread: communication, never reported as the model's slowest op.
    events = [X("ProfilerStep#1", 0.0, 100.0, cat="user_annotation"), X("aten::add", 0.0, 10.0),
              X("HcclAllreduce", 10.0, 90.0)]
    store, _ = parse_one(write_trace(tmp_path / "t.json", events), tmp_path / "out")
    with store:
        assert store.rows("SELECT phase, sum(dur_ns) FROM phase_spans WHERE view = 'host' AND phase = "
                          "'communication' GROUP BY phase") == [("communication", 90_000)]
        dominant = [str(f.to_dict()) for f in advise(store).findings if f.id == "dominant_op"]
    assert not [f for f in dominant if "HcclAllreduce" in f]


def test_data_loading_is_one_definition_for_phases_and_advisor(tmp_path):
    # A loader op that is not torch's enumerate(DataLoader): data loading to the phases, so the advisor
    # neither calls it the dominant op nor leaves it out of the input-pipeline finding's loaders.
    events = [X("ProfilerStep#1", 0.0, 100.0, cat="user_annotation"), X("aten::mm", 0.0, 20.0),
              X("MyDataLoader.__next__#_SingleProcessDataLoaderIter", 20.0, 80.0)]
    store, _ = parse_one(write_trace(tmp_path / "t.json", events), tmp_path / "out")
    with store:
        assert store.rows("SELECT sum(dur_ns) FROM phase_spans WHERE view = 'host' AND phase = 'data_loading'"
                          ) == [(80_000,)]
        findings = advise(store).findings
    assert not [f for f in findings if f.id == "dominant_op" and "MyDataLoader" in str(f.to_dict())]
    (loading,) = [f for f in findings if f.id == "data_loading"]
    assert [op["name"] for op in loading.evidence.ops] == ["MyDataLoader.__next__#_SingleProcessDataLoaderIter"]
    assert loading.evidence.metrics["single_process_loader"] is True
