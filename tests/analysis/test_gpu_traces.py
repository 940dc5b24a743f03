"""The analyses on the shared real GPU traces: findings agree with the step breakdown's numbers."""

from __future__ import annotations

import pytest

from mlprof.analysis.advisor import advise
from mlprof.analysis.compare import compare
from mlprof.analysis.op_analyse import op_analysis
from mlprof.analysis.steps import step_breakdown
from mlprof.tables.store import TableStore
from mlprof.workflow import cluster


def _open(path):
    return TableStore(path / "tables")


@pytest.mark.parametrize("key", ["rank0", "rank1", "nccl", "amd"])
def test_device_findings_match_the_step_breakdown(gpu_traces, key):
    with _open(gpu_traces[key]) as store:
        report, steps = advise(store), step_breakdown(store)
    total = sum(s.dur_ns for s in steps)
    assert report.total_step_ns == total > 0
    # Device idle of cause "launch" only: idle while the host loads data, runs Python, collects
    # garbage or syncs belongs to those findings (no millisecond counted twice).
    idle = sum(s.idle_launch_ns for s in steps)
    assert sum(s.free_ns + s.preparing_ns for s in steps) == sum(
        s.idle_launch_ns + s.idle_data_loading_ns + s.idle_python_ns + s.idle_gc_ns + s.idle_synchronization_ns
        + s.idle_communication_ns for s in steps)
    exposed = sum(s.communication_not_overlapped_ns for s in steps)
    by_id = {f.id: f for f in report.findings}
    for rule, expected in (("device_idle", idle), ("communication_overlap", exposed)):
        if expected / total >= 0.03:  # the info threshold
            assert by_id[rule].impact_ns == expected
            assert by_id[rule].share == pytest.approx(expected / total, abs=1e-4)
        else:
            assert rule not in by_id
    for f in report.findings:
        assert 0 <= f.share <= 1 and f.fix and f.severity in ("critical", "warning", "info")


def test_trace_filter_ranks_flag_exposed_communication(gpu_traces):
    # These two ranks of a 128-rank job spend about a quarter of each step in all-to-all not hidden by compute.
    for key in ("rank0", "rank1"):
        with _open(gpu_traces[key]) as store:
            ids = {f.id: f for f in advise(store).findings}
        assert ids["communication_overlap"].severity in ("warning", "critical")


def test_dominant_gpu_op_is_its_kernels_time(gpu_traces):
    with _open(gpu_traces["ns_resolution"]) as store:
        report = advise(store)
        (f,) = [f for f in report.findings if f.id == "dominant_op"][:1]
        op = f.evidence.metrics["op"]
        device = store.rows("""SELECT sum(d.dur_ns) FROM device_ops d JOIN host_ops h ON h.op_id = d.host_op_id
                               WHERE h.name = ? AND h.step IS NOT NULL AND d.kind IN ('kernel', 'memcpy', 'memset')
                               AND NOT coalesce(h.folded, false)""", [op])[0][0]
        groups = op_analysis(store, op)[op]
    assert f.impact_ns == device
    # Convolution backward leading a CNN's step is compute-bound, not a defect.
    assert f.evidence.metrics["expected_compute"] and f.severity == "info"
    assert sum(g.device_self_ns for g in groups) >= device  # op_analyse counts every step, not only profiled ones


def test_compare_two_gpu_ranks_is_step_aligned(gpu_traces):
    with _open(gpu_traces["rank0"]) as a, _open(gpu_traces["rank1"]) as b:
        c = compare(a, b)
        steps_a = [s.step for s in step_breakdown(a)]
    assert c.aligned_by == "step number" and [p.base_step for p in c.step_pairs] == steps_a
    assert c.kernels and c.breakdown
    device = {d.name: d for d in c.breakdown}
    assert {"computing", "communication_not_overlapped", "free", "preparing"} <= set(device)
    # The device columns partition the step, so their deltas add up to the step's.
    parts = ("computing", "communication_not_overlapped", "free", "preparing")
    assert sum(device[p].delta_ns for p in parts) == pytest.approx(c.step_time.delta_ns, abs=1)


def test_cluster_over_two_gpu_ranks(gpu_traces):
    root = gpu_traces["rank0"].parent.parent
    both = root / "pair"
    both.mkdir(exist_ok=True)
    for key in ("rank0", "rank1"):
        src = gpu_traces[key].parent / f"{key}.pt.trace.json.gz"
        (both / src.name).write_bytes(src.read_bytes())
    report = cluster(both, workers=2)
    assert [r.rank for r in report.ranks] == [0, 1]
    for r in report.ranks:
        assert r.free_ns is not None and r.communication_ns > 0
        assert r.wait_ns + r.transit_ns == pytest.approx(r.communication_ns)


def test_a_launch_bound_transformer_on_an_h200_is_launch_bound_not_a_python_loop(tmp_path):
    """A real trace of our own (tests/data/make_h200_trace.py): a small DDP transformer whose 94% of
    kernels run under 10 us. The host issuing them is the bottleneck; the many tiny ops are the layers'
    own (views, transposes, DDP's per-parameter copies), not a Python loop to vectorise."""
    from mlprof.parse import ParseOptions, parse_path
    from shared_data import H200_TRACE

    result = parse_path(H200_TRACE, ParseOptions(output_dir=tmp_path / "out"))[0]
    with TableStore(result.tables_dir) as store:
        report, steps = advise(store), step_breakdown(store)
    by_id = {f.id: f for f in report.findings}
    assert len(steps) == 4
    idle = by_id["device_idle"]
    assert idle.severity == "critical" and "Launch-bound" in idle.title
    assert idle.impact_ns == sum(s.idle_launch_ns for s in steps)
    storm = by_id["op_storm"]
    assert storm.severity == "info" and "not a Python loop" in storm.title and "Vectorise" not in storm.fix
    assert storm.evidence.metrics["inside_framework_ops_share"] > 0.8
    assert not [f for f in report.findings if f.severity in ("critical", "warning") and f.id != "device_idle"]
