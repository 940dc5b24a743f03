"""Golden tests of single rules: a tiny inline trace with known times -> the exact finding."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mlprof.analysis.advisor import AdvisorContext, Thresholds, advise
from mlprof.analysis.advisor.rules_env import cpu_oversubscription
from mlprof.analysis.compare import compare
from mlprof.parse import ParseOptions, parse_path
from mlprof.tables.store import TableStore
from trace_events import BASE_NS, X

STEP_US = 10_000


def _store(tmp_path: Path, events: list[dict], name="t") -> TableStore:
    path = tmp_path / f"{name}.pt.trace.json"
    path.write_text(json.dumps({"schemaVersion": 1, "baseTimeNanoseconds": BASE_NS, "traceEvents": events}))
    return TableStore(parse_path(path, ParseOptions(output_dir=tmp_path / f"{name}_out"))[0].tables_dir)


def _gpu_steps(n_steps=4, sync_us=2_900, malloc_us=500, recompile_step=None):
    """Steps of 10 ms: a matmul kernel of 4 ms, an .item() blocked in cudaStreamSynchronize, a cudaMalloc."""
    events, corr = [], 100
    for i in range(n_steps):
        t0 = i * STEP_US
        events.append(X(f"ProfilerStep#{i + 1}", t0, STEP_US, cat="user_annotation"))
        events.append(X("aten::mm", t0 + 100, 300, **{"External id": corr}))
        events.append(X("cudaLaunchKernel", t0 + 150, 50, cat="cuda_runtime", correlation=corr,
                        **{"External id": corr}))
        events.append(X("gemm_kernel", t0 + 500, 4_000, cat="kernel", pid=0, tid=7, device=0, stream=7,
                        correlation=corr))
        events.append(X("aten::item", t0 + 1_000, sync_us + 50))
        events.append(X("aten::_local_scalar_dense", t0 + 1_010, sync_us + 30))
        events.append(X("cudaStreamSynchronize", t0 + 1_020, sync_us, cat="cuda_runtime", correlation=corr + 1))
        events.append(X("cudaMalloc", t0 + 5_000, malloc_us, cat="cuda_runtime", correlation=corr + 2))
        if recompile_step == i:
            events.append(X("Torch-Compiled Region: 0/1", t0 + 6_000, 100, cat="user_annotation"))
        corr += 10
    return events


def test_sync_memory_and_recompile_rules_report_exact_shares(tmp_path):
    with _store(tmp_path, _gpu_steps(recompile_step=2)) as store:
        report = advise(store)
    by_id = {f.id: f for f in report.findings}
    total_ns = 4 * STEP_US * 1000
    assert report.total_step_ns == total_ns
    sync = by_id["synchronization"]
    # .item()'s _local_scalar_dense holds the sync call and its own 30 us: the larger view counts.
    assert sync.impact_ns == 4 * 2_930_000 and sync.share == pytest.approx(0.293)
    assert sync.severity == "warning"  # 29% < critical_share 30%
    assert {o["name"] for o in sync.evidence.ops} >= {"cudaStreamSynchronize", "aten::item"}
    mem = by_id["memory_churn"]
    assert mem.impact_ns == 4 * 500_000 and mem.share == pytest.approx(0.05) and mem.severity == "warning"
    rec = by_id["recompilation"]
    assert rec.severity == "warning" and "0/1" in rec.evidence.metrics["recompiled_regions"]
    # Device busy 4 of every 10 ms, from 0.5 ms into the step: idle 6 ms a step.
    idle = by_id["device_idle"]
    m = idle.evidence.metrics
    causes = sum(v for k, v in m.items() if k.startswith("idle_") and k != "idle_ns" and k.endswith("_ns"))
    assert causes == 4 * 6_000_000  # every idle ns has one cause
    # The .item() returns before the kernel ends, so no idle gap begins in the sync; after 4.5 ms the
    # host is back in Python: that idle is the Python rule's, not a launch problem.
    assert idle.impact_ns == m["idle_launch_ns"] and m["idle_python_ns"] > m["idle_launch_ns"]


def test_a_step_slow_by_compiling_is_recompilations_finding_not_an_outlier(tmp_path):
    """A recompile in step 5 (torch.compile's compile_inner span, as Kineto records it) makes that step 9x the
    median: the finding is recompilation's; step_outliers stays silent on it, and still sees a slow step that
    ran more work."""
    def steps(extra_work_step=None):
        events, t = [], 0
        for i in range(10):
            compiling = 8_000 if i == 4 else 0
            work = 4_000 if i == extra_work_step else 0
            dur = 1_000 + compiling + work
            events.append(X(f"ProfilerStep#{i + 1}", t, dur, cat="user_annotation"))
            events.append(X("aten::addmm", t + 10, 900))
            if compiling:
                events.append(X("Torch-Compiled Region: 0/1", t + 950, compiling + 40))
                events.append(X("_compile.compile_inner (dynamo_timed)", t + 960, compiling))
            if work:
                events.append(X("aten::mm", t + 960, work))
            t += dur
        return events

    with _store(tmp_path, steps(), "compiled") as store:
        by_id = {f.id: f for f in advise(store).findings}
    assert by_id["recompilation"].severity in ("warning", "critical") and by_id["recompilation"].impact_ns == 8_000_000
    assert "step_outliers" not in by_id
    with _store(tmp_path, steps(extra_work_step=8), "and_work") as store:
        (f,) = [f for f in advise(store).findings if f.id == "step_outliers"]
    assert [s["step"] for s in f.evidence.steps] == [9] and f.impact_ns == 4_000_000


def test_cheap_syncs_and_allocations_stay_silent(tmp_path):
    with _store(tmp_path, _gpu_steps(sync_us=50, malloc_us=20)) as store:
        ids = {f.id for f in advise(store).findings}
    assert not ids & {"synchronization", "memory_churn", "recompilation"}


def _cpu_steps(durations_us):
    events, t = [], 0
    for i, dur in enumerate(durations_us):
        events.append(X(f"ProfilerStep#{i + 1}", t, dur, cat="user_annotation"))
        events.append(X("aten::addmm", t + 10, dur - 20))
        t += dur
    return events


def test_recurring_slow_steps_warn_and_one_alone_is_info(tmp_path):
    recurring = [1_000, 1_000, 3_000, 1_000, 1_000, 3_000]
    with _store(tmp_path, _cpu_steps(recurring), "a") as store:
        (f,) = [f for f in advise(store).findings if f.id == "step_outliers"]
    assert f.evidence.metrics["median_step_ns"] == 1_000_000 and f.evidence.metrics["outliers"] == 2
    assert f.impact_ns == 2 * 2_000_000 and f.share == pytest.approx(4 / 10)
    assert f.severity == "critical" and [s["step"] for s in f.evidence.steps] == [3, 6]
    # The addmm inside grew by 2 ms in each: forward time is what made them slow.
    assert {(s["grew_most"], s["grew_most_by_ns"]) for s in f.evidence.steps} == {("forward", 2_000_000)}
    with _store(tmp_path, _cpu_steps([1_000] * 5 + [3_000]), "b") as store:
        (g,) = [f for f in advise(store).findings if f.id == "step_outliers"]
    assert g.severity == "info"


def test_compare_of_golden_traces_is_exact(tmp_path):
    with _store(tmp_path, _cpu_steps([1_000] * 4), "base") as b, \
            _store(tmp_path, _cpu_steps([1_500] * 4), "new") as n:
        c = compare(b, n)
    assert c.step_time.delta_ns == 500_000 and c.step_time.delta_pct == pytest.approx(50.0)
    (addmm,) = [d for d in c.op_types if d.name == "aten::addmm"]
    assert addmm.base_ns == 980_000 and addmm.new_ns == 1_480_000 and addmm.share_of_step_delta == pytest.approx(1.0)
    assert c.slower_than(49) and not c.slower_than(51)


@pytest.mark.parametrize("env,system,expected", [
    ({"LOCAL_WORLD_SIZE": "4", "OMP_NUM_THREADS": "8"}, {"cpu_count": 16, "torch_num_threads": 8}, 32),
    ({"OMP_NUM_THREADS": "2"}, {"cpu_count": 2, "cpu_affinity_count": 2, "torch_num_threads": 2}, None),
    ({}, {"cpu_count": 8, "cpu_affinity_count": 4, "torch_num_threads": 8}, 8),
])
def test_cpu_oversubscription_from_environment_facts(tmp_path, env, system, expected):
    with _store(tmp_path, _cpu_steps([1_000] * 3)) as store:
        ctx = AdvisorContext(store)
        # The collector stores these under profiler_metadata.*; a bare trace has none, so set them.
        ctx.__dict__["metadata"] = {"profiler_metadata.environment": env, "profiler_metadata.system": system}
        found = cpu_oversubscription(ctx, Thresholds())
    if expected is None:
        assert found == []
    else:
        (f,) = found
        assert f.severity == "warning" and f"{expected} compute threads" in f.title


def test_thresholds_are_validated():
    from mlprof.errors import ConfigError

    with pytest.raises(ConfigError, match="gc_warn_share"):
        Thresholds(gc_warn_share=-1)
    with pytest.raises(ConfigError, match="NAME=VALUE"):
        Thresholds.from_overrides(["nonsense"])
    assert Thresholds.from_overrides(["gc-warn-share=0.5", "allocations_per_step=10"]).allocations_per_step == 10


def test_empty_cache_inside_steps_is_a_memory_warning(tmp_path):
    events = _gpu_steps(malloc_us=20)
    events.append(X("torch/cuda/memory.py(192): empty_cache", 7_000, 100, cat="python_function"))
    with _store(tmp_path, events) as store:
        (f,) = [f for f in advise(store).findings if f.id == "memory_churn"]
    assert f.severity == "warning" and f.evidence.metrics["empty_cache_calls"] == 1


def _shaped_steps(lengths):
    events, t = [], 0
    for i, n in enumerate(lengths):
        events.append(X(f"ProfilerStep#{i + 1}", t, 1_000, cat="user_annotation"))
        events.append(X("aten::mm", t + 10, 500, **{"Input Dims": [[n, 64], [64, 64]], "Input type": ["float"] * 2}))
        events.append(X("aten::relu", t + 600, 100, **{"Input Dims": [[8, 64]], "Input type": ["float"]}))
        t += 1_000
    return events


def test_shapes_varying_between_steps_are_reported(tmp_path):
    with _store(tmp_path, _shaped_steps([17, 33, 25, 40]), "dyn") as store:
        (f,) = [f for f in advise(store).findings if f.id == "dynamic_shapes"]
    assert f.severity == "info" and [o["name"] for o in f.evidence.ops] == ["aten::mm"]
    assert f.evidence.ops[0]["distinct_shapes"] == 4 and f.impact_ns == 4 * 500_000
    with _store(tmp_path, _shaped_steps([32, 32, 32, 32]), "static") as store:
        assert not [f for f in advise(store).findings if f.id == "dynamic_shapes"]


def test_a_trace_without_steps_is_judged_as_one_step(tmp_path):
    events = [e for e in _gpu_steps() if not e["name"].startswith("ProfilerStep#")]
    with _store(tmp_path, events, "nosteps") as store:
        report = advise(store)
        # The caller's store is not changed by the whole-trace view.
        assert store.count("steps") == 0 and store.rows("SELECT count(step) FROM host_ops")[0][0] == 0
    assert report.whole_trace and report.step_count == 1
    # From the first op (0.1 ms) to the last event's end: the cudaMalloc of the 4th 10 ms period.
    assert report.total_step_ns == (3 * STEP_US + 5_000 + 500 - 100) * 1000
    by_id = {f.id: f for f in report.findings}
    assert by_id["synchronization"].impact_ns == 4 * 2_930_000


def _steps_led_by(op_name, n_steps=4, step_us=1_000, op_us=400):
    """Steps of 1 ms: a matmul, then ``op_name`` for 40% of the step, called from the user's model."""
    events, t = [], 0
    for i in range(n_steps):
        events.append(X(f"ProfilerStep#{i + 1}", t, step_us, cat="user_annotation"))
        events.append(X("aten::addmm", t + 10, 300))
        events.append(X(op_name, t + 400, op_us, **{"Input Dims": [[32, 16, 32, 32]], "Input type": ["float"]}))
        t += step_us
    return events


@pytest.mark.parametrize("op_name, layer", [("aten::max_pool2d_with_indices", "pooling"),
                                            ("aten::native_batch_norm", "normalisation"),
                                            ("aten::gelu", "activation")])
def test_a_standard_layer_called_functionally_is_not_a_culprit(tmp_path, op_name, layer):
    # F.max_pool2d leading a healthy CNN's host time: the architecture, with no built-in to switch to.
    with _store(tmp_path, _steps_led_by(op_name)) as store:
        (f,) = [f for f in advise(store).findings if f.id == "dominant_op" and f.evidence.metrics["op"] == op_name]
    assert f.severity == "info" and f.share == pytest.approx(0.4)
    assert f.evidence.metrics["standard_layer"] == layer and "no faster built-in" in f.fix
    assert "hand-written" not in f.fix


def _dropout_steps(parent: str | None, n_steps=4, step_us=1_000):
    """Steps led by aten::bernoulli_ (40%): inside aten::dropout (F.dropout) or, without ``parent``, called
    on its own (a hand-written dropout's mask)."""
    events, t = [], 0
    for i in range(n_steps):
        events.append(X(f"ProfilerStep#{i + 1}", t, step_us, cat="user_annotation"))
        events.append(X("aten::addmm", t + 10, 300))
        if parent:
            events.append(X(parent, t + 390, 420))
        events.append(X("aten::bernoulli_", t + 400, 400, **{"Input Dims": [[32, 64]], "Input type": ["float"]}))
        t += step_us
    return events


def test_an_op_inside_a_standard_layers_op_belongs_to_that_layer(tmp_path):
    # F.dropout in a library's or torch.fx-generated forward: the mask's bernoulli_ leads the step, no
    # nn.Dropout module is seen, and there is still no built-in to switch to.
    with _store(tmp_path, _dropout_steps("aten::dropout"), "in_dropout") as store:
        (f,) = [f for f in advise(store).findings if f.id == "dominant_op"
                and f.evidence.metrics["op"] == "aten::bernoulli_"]
    assert f.severity == "info" and f.evidence.metrics["standard_layer"] == "dropout"
    # The same op called on its own is a hand-written mask: still a warning.
    with _store(tmp_path, _dropout_steps(None), "alone") as store:
        (f,) = [f for f in advise(store).findings if f.id == "dominant_op"
                and f.evidence.metrics["op"] == "aten::bernoulli_"]
    assert f.severity in ("warning", "critical") and f.evidence.metrics["standard_layer"] is None


@pytest.mark.parametrize("op_name", ["aten::sort", "aten::linalg_eigh", "aten::cumsum"])
def test_an_unusual_op_leading_the_step_is_still_a_warning(tmp_path, op_name):
    with _store(tmp_path, _steps_led_by(op_name)) as store:
        (f,) = [f for f in advise(store).findings if f.id == "dominant_op" and f.evidence.metrics["op"] == op_name]
    assert f.severity in ("warning", "critical") and f.evidence.metrics["standard_layer"] is None
    assert "hand-written" in f.fix


def _many_op_steps(extra_us_by_step, extra_ops_by_step=None, ops=30, op_us=30):
    """Steps of ``ops`` addmm calls of ``op_us`` each; ``extra_us_by_step``: step -> us added to one op of it
    (the same ops, slower); ``extra_ops_by_step``: step -> more mm calls of 100 us each (more work)."""
    events, t = [], 0
    for i in range(20):
        step = i + 1
        extra = extra_us_by_step.get(step, 0)
        more = (extra_ops_by_step or {}).get(step, 0)
        dur = 20 + ops * (op_us + 5) + extra + more * 105
        events.append(X(f"ProfilerStep#{step}", t, dur, cat="user_annotation"))
        at = t + 10
        for k in range(ops):
            length = op_us + (extra if k == 7 else 0)
            events.append(X("aten::addmm", at, length))
            at += length + 5
        for _ in range(more):
            events.append(X("aten::mm", at, 100))
            at += 105
        t += dur
    return events


def test_outliers_that_ran_a_typical_steps_ops_slower_are_the_machine_not_the_code(tmp_path):
    """Default intra-op threads: one helper preempted holds an op at its barrier, the step's own wait shows
    nothing. Steps with the same 30 ops, one of them 3 ms longer, are an info line; steps that ran 30 more ops
    (periodic work) warn, and the slower-ops steps are said to be left out."""
    slower = {3: 3_000, 9: 3_000, 14: 3_000}
    with _store(tmp_path, _many_op_steps(slower), "same") as store:
        (f,) = [f for f in advise(store).findings if f.id == "step_outliers"]
    assert f.severity == "info" and f.evidence.metrics["same_ops_slower_steps"] == 3
    assert "ran the same ops as a typical step, slower" in f.title and "Nothing to change in the code" in f.fix
    work = {5: 30, 10: 30, 15: 30}
    with _store(tmp_path, _many_op_steps(slower, work), "both") as store:
        (g,) = [f for f in advise(store).findings if f.id == "step_outliers"]
    assert g.severity in ("warning", "critical") and g.evidence.metrics["outliers"] == 3
    assert sorted(s["step"] for s in g.evidence.steps) == [5, 10, 15]
    assert g.evidence.metrics["machine_slowed_left_out"] == 3 and "ran a typical step's ops, slower" in g.title
