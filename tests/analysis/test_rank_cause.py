"""A slow rank's cause from per-rank attribution, and collectives across ranks (skew, arrival order), on
small data made by hand: the rules, figure by figure. The real jobs are in test_straggler_runs.py."""

from __future__ import annotations

import pytest

from mlprof.analysis.cluster import combine
from mlprof.tables.names import collective_kind
from mlprof.analysis.rank_cause import JobBaseline, median_without, slow_rank_cause
from mlprof.tables.phases import HOST_PHASES

MS = 1_000_000


def attribution(wait_ms: float = 1.0, shape: str = "[16, 128]", **phases_ms) -> dict:
    host = {p: 0.0 for p in HOST_PHASES}
    host.update({"forward": 5 * MS, "backward": 8 * MS, "optimizer": 1 * MS})
    host.update({p: v * MS for p, v in phases_ms.items()})
    n = 1
    for d in shape.strip("[]").split(","):
        n *= int(d)
    return {"host": host, "idle": None, "cpu_wait_ns": wait_ms * MS,
            "sites": {"forward": {"train.py:10 main": host["forward"]}, "gc": {"train.py:20 main": host["gc"]}},
            "modules": {"Net.big": {"forward": host["forward"] * 0.8, "backward": 0.0, "device": 0.0},
                        "Net.small": {"forward": host["forward"] * 0.2, "backward": 0.0, "device": 0.0}},
            "input_shape": shape, "input_elements": n}


def job(me: dict, others: list[dict]) -> JobBaseline:
    return JobBaseline([me, *others])


def test_the_phase_with_the_largest_excess_is_the_cause_with_its_call_site():
    others = [attribution(), attribution(), attribution(forward=40)]  # one other rank's outlier: the median holds
    cause = slow_rank_cause(attribution(gc=30), job(attribution(gc=30), others), "compute", 31 * MS,
                            others_wait_ns=30 * MS)
    assert cause["cause"] == "gc" and cause["label"] == "garbage collection"
    assert cause["excess_ns"] == 30 * MS and cause["share_of_others_wait"] == pytest.approx(1.0)
    assert cause["call_site"] == "train.py:20 main" and cause["module"] is None


def test_forward_excess_names_the_module():
    me = attribution(forward=25)
    cause = slow_rank_cause(me, job(me, [attribution()] * 3), "compute", 20 * MS, 20 * MS)
    assert (cause["cause"], cause["module"], cause["call_site"]) == ("forward", "Net.big", "train.py:10 main")


def test_the_wait_for_a_core_is_the_cause_only_when_it_is_most_of_the_excess():
    # A busy neighbour: every phase a little longer, the wait for a core the most.
    busy = attribution(wait_ms=20, forward=12, backward=14, python=3)
    cause = slow_rank_cause(busy, job(busy, [attribution()] * 3), "compute", 15 * MS, 15 * MS)
    assert cause["cause"] == "cpu_contention"
    # Extra forward work on a loaded host waits for a core too, but less than the forward phase grew.
    loaded = attribution(wait_ms=12, forward=30)
    assert slow_rank_cause(loaded, job(loaded, [attribution()] * 3), "compute", 26 * MS, 26 * MS)["cause"] == "forward"


def test_slower_host_collectives_with_a_long_wait_for_a_core_are_contention():
    # Gloo's transfers run on the rank's CPU: a busy neighbour shows as transit and a wait for a core.
    busy = attribution(wait_ms=15)
    assert slow_rank_cause(busy, job(busy, [attribution()] * 3), "communication", 24 * MS, 40 * MS,
                           host_collectives=True)["cause"] == "cpu_contention"
    # Device collectives (NCCL) do not wait for a host core; a slow link leaves the wait where the others' is.
    assert slow_rank_cause(busy, job(busy, [attribution()] * 3), "communication", 24 * MS, 40 * MS,
                           host_collectives=False)["cause"] == "communication_transit"
    link = attribution(wait_ms=2)
    assert slow_rank_cause(link, job(link, [attribution()] * 3), "communication", 24 * MS, 40 * MS,
                           host_collectives=True)["cause"] == "communication_transit"


def test_a_larger_input_is_named():
    me = attribution(shape="[32, 128]", forward=10)
    cause = slow_rank_cause(me, job(me, [attribution()] * 3), "compute", 5 * MS, 5 * MS)
    assert cause["cause"] == "input_size" and "[32, 128] vs [16, 128]" in cause["label"]


def test_no_attribution_no_cause():
    assert slow_rank_cause({}, job({}, [attribution()]), "compute", MS, MS) is None


@pytest.mark.parametrize("values", [[1.0, 2.0, 3.0, 4.0, 100.0], [5.0, 5.0, 1.0], [2.0, 7.0], [3.0, 3.0, 3.0, 9.0]])
def test_median_without_is_the_median_of_the_others(values):
    import statistics

    ordered = sorted(values)
    for i, v in enumerate(values):
        others = values[:i] + values[i + 1:]
        assert median_without(ordered, v) == statistics.median(others)
    assert median_without(ordered, -1.0) is None and median_without([4.0], 4.0) is None


@pytest.mark.parametrize("name, kind", [
    ("gloo:all_reduce", "allreduce"), ("nccl:all_reduce", "allreduce"), ("c10d::allreduce_", "allreduce"),
    ("ncclKernel_AllReduce_RING_LL_Sum_float", "allreduce"), ("ncclDevKernel_AllReduce_Sum_f32_RING_LL", "allreduce"),
    ("ncclDevKernel_AllGather_RING_LL", "allgather"), ("nccl:_allgather_base", "allgather"),
    ("ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL", "reducescatter"), ("c10d::reduce_scatter_tensor_coalesced_",
                                                                         "reducescatter"),
    ("ncclDevKernel_SendRecv", "sendrecv"), ("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t", "sendrecv"),
    ("ncclDevKernel_Broadcast_RING_LL", "broadcast"), ("gloo:broadcast", "broadcast"),
    ("hcom_allReduce__123_0_1", "allreduce"), ("HcclAllreduce", "allreduce"), ("hcom_broadcast_", "broadcast"),
    ("gloo:barrier", "barrier"), ("nccl:all_to_all", "alltoall"), ("ncclDevKernel_Reduce_Sum_f32_RING_LL", "reduce"),
    ("aten::mm", None), (None, None),
])
def test_collective_kind_across_namings(name, kind):
    assert collective_kind(name) == kind


def _rank(rank: int, starts_ms: list[float], dur_ms: float = 4.0) -> dict:
    ops = [{"name": "gloo:all_reduce", "grp": "", "step": i, "start_ns": int(s * MS), "dur_ns": int(dur_ms * MS),
            "size_bytes": 4000} for i, s in enumerate(starts_ms)]
    steps = [{"window": 0, "step": i, "dur_ns": 10 * MS, "compute_ns": 6 * MS, "communication_ns": 4 * MS,
              "communication_not_overlapped_ns": 4 * MS, "free_ns": None, "data_loading_ns": 0} for i in range(3)]
    return {"rank": rank, "source": f"r{rank}", "comm_kind": "host", "steps": steps, "comm_ops": ops, "matrix": []}


def test_arrival_order_and_heatmap_rows():
    # Rank 1 arrives last in instances 0 and 2 (3 ms behind), rank 0 in instance 1 (1 ms behind).
    report = combine([_rank(0, [0, 11, 20]), _rank(1, [3, 10, 23])])
    arr = {a["rank"]: a for a in report.arrivals}
    assert (arr[1]["last_count"], arr[1]["instances"], arr[1]["mean_late_ns"]) == (2, 3, 2 * MS)
    assert (arr[0]["last_count"], arr[0]["last_share"], arr[0]["kind"]) == (1, 0.3333, "allreduce")
    heat = {(r["rank"], r["step"]): r for r in report.skew_rows}
    assert heat[(0, 0)]["wait_ns"] == 3 * MS and heat[(0, 0)]["transit_ns"] == 1 * MS
    assert heat[(1, 1)]["wait_ns"] == 1 * MS and heat[(1, 0)]["wait_ns"] == 0
    # Lateness is the late rank's side of the same skew: behind the first rank to arrive.
    assert [heat[(1, s)]["late_ns"] for s in range(3)] == [3 * MS, 0, 3 * MS]
    assert [heat[(0, s)]["late_ns"] for s in range(3)] == [0, 1 * MS, 0]
    assert {c.kind for c in report.collectives} == {"allreduce"}
