"""Golden tests of the diagnosis rules on tiny traces: slow dtypes, fresh tensors, fused RNN kernels,
and the split of a rank's exposed communication into transfer and waiting."""

from __future__ import annotations

import pytest

from mlprof.analysis.advisor import Thresholds, advise
from mlprof.analysis.advisor.model import Evidence, Finding
from mlprof.analysis.advisor.rules_comm import split_waiting

from test_rules_golden import X, _store

STEP_US = 1_000


def _steps(body, n=5):
    """``n`` steps of 1 ms; ``body(t0)`` gives each step's ops."""
    events = []
    for i in range(n):
        t0 = i * STEP_US
        events.append(X(f"ProfilerStep#{i + 1}", t0, STEP_US, cat="user_annotation"))
        events.extend(body(t0))
    return events


def _ids(store):
    return {f.id: f for f in advise(store).findings}


def test_ops_on_float64_inputs_are_a_slow_dtype_finding(tmp_path):
    def body(dtype):
        return lambda t0: [X("aten::mm", t0 + 10, 400, **{"Input Dims": [[64, 64], [64, 64]], "Input type": [dtype] * 2}),
                           X("aten::relu", t0 + 500, 100, **{"Input Dims": [[64, 64]], "Input type": [dtype]})]

    with _store(tmp_path, _steps(body("double")), "f64") as store:
        f = _ids(store)["slow_dtype"]
    # mm and relu on doubles: 500 of every 1000 us.
    assert f.share == pytest.approx(0.5) and f.severity == "critical"
    assert [o["name"] for o in f.evidence.ops] == ["aten::mm", "aten::relu"]
    assert "float64" in f.title and "float32" in f.fix and "from_numpy" in f.fix
    with _store(tmp_path, _steps(body("float")), "f32") as store:
        assert "slow_dtype" not in _ids(store)


def test_fresh_tensors_own_their_fill_and_dominant_op_does_not_repeat_it(tmp_path):
    def body(t0):
        return [X("aten::zeros", t0 + 10, 600), X("aten::zero_", t0 + 20, 580), X("aten::fill_", t0 + 25, 570),
                X("aten::mm", t0 + 700, 200)]

    with _store(tmp_path, _steps(body), "churn") as store:
        findings = advise(store).findings
    churn = next(f for f in findings if f.id == "memory_churn")
    assert churn.share == pytest.approx(0.6) and churn.severity == "critical"
    assert churn.evidence.metrics["calls_per_step"] == 1 and churn.evidence.ops[0]["name"] == "aten::zeros"
    # The fill_ under zeros is memory_churn's time, not a dominant op.
    assert not [f for f in findings if f.id == "dominant_op" and f.evidence.metrics["op"] == "aten::fill_"]
    # A small buffer each step is fine.
    small = lambda t0: [X("aten::zeros", t0 + 10, 20), X("aten::fill_", t0 + 12, 15), X("aten::mm", t0 + 100, 800)]
    with _store(tmp_path, _steps(small), "small") as store:
        assert "memory_churn" not in _ids(store)


def test_a_buffer_torch_allocates_inside_its_own_op_is_not_the_jobs_churn(tmp_path):
    # embedding_dense_backward zeroes a fresh gradient of the whole table each step: torch's, not hoistable.
    def body(t0):
        return [X("aten::embedding_dense_backward", t0 + 10, 700), X("aten::zeros", t0 + 20, 500),
                X("aten::fill_", t0 + 25, 480), X("aten::mm", t0 + 750, 200)]

    with _store(tmp_path, _steps(body), "inner") as store:
        assert "memory_churn" not in _ids(store)
    # The same zeros called by the job's own code, between ops, is.
    top = lambda t0: [X("aten::zeros", t0 + 10, 500), X("aten::fill_", t0 + 15, 480),
                      X("aten::embedding_dense_backward", t0 + 600, 200), X("aten::mm", t0 + 850, 100)]
    with _store(tmp_path, _steps(top), "top") as store:
        assert _ids(store)["memory_churn"].share == pytest.approx(0.5)


def test_fill_outside_a_factory_op_is_still_a_dominant_op(tmp_path):
    body = lambda t0: [X("aten::fill_", t0 + 10, 700), X("aten::mm", t0 + 800, 100)]
    with _store(tmp_path, _steps(body), "fill") as store:
        found = _ids(store)
    assert found["dominant_op"].evidence.metrics["op"] == "aten::fill_"
    assert found["dominant_op"].severity == "critical" and "memory_churn" not in found


@pytest.mark.parametrize("kernel", ["aten::mkldnn_rnn_layer_backward", "aten::_thnn_fused_lstm_cell",
                                    "aten::_slow_conv2d_backward", "aten::lstm"])
def test_fused_recurrent_and_conv_kernels_leading_the_step_are_healthy(tmp_path, kernel):
    body = lambda t0: [X(kernel, t0 + 10, 700), X("aten::add", t0 + 800, 50)]
    with _store(tmp_path, _steps(body), "k") as store:
        f = _ids(store)["dominant_op"]
    assert f.evidence.metrics["op"] == kernel and f.severity == "info"


def _comm_finding(share):
    return Finding(id="communication_overlap", title="t", severity="critical", share=share, impact_ns=0,
                   evidence=Evidence(metrics={}), fix="Overlap gradients' all-reduce.")


def test_exposed_communication_beyond_the_last_arrival_is_waiting():
    th = Thresholds()
    step_ns = 10_000_000
    waiting_rank = {s: 6_000_000 for s in range(1, 6)}  # waits 6 ms a step ...
    late_rank = {s: 500_000 for s in range(1, 6)}  # ... for a rank that arrives last and waits 0.5 ms
    f = split_waiting(_comm_finding(0.6), waiting_rank, [late_rank], 5 * step_ns, th, ["1"])
    assert f.evidence.metrics["transfer_ns"] == 5 * 500_000 and f.evidence.metrics["waiting_ns"] == 5 * 5_500_000
    assert f.share == pytest.approx(0.05) and f.severity == "info"
    assert "waiting for rank 1" in f.title and f.fix.startswith("Most of this rank's")
    # Balanced ranks that both block 3 ms: all transfer, the finding stands.
    both = {s: 3_000_000 for s in range(1, 6)}
    g = split_waiting(_comm_finding(0.3), both, [dict(both)], 5 * step_ns, th, [])
    assert g.severity == "critical" and g.share == 0.3 and "waiting_ns" not in g.evidence.metrics


def test_tables_an_older_mlprof_wrote_read_newer_columns_as_null_and_count_as_stale(tmp_path):
    import json

    import duckdb

    from mlprof.outputs import is_stale

    body = lambda t0: [X("aten::mm", t0 + 10, 700)]
    with _store(tmp_path, _steps(body), "old") as store:
        tables = store.tables_dir
    trace = tmp_path / "old.pt.trace.json"
    out = tables.parent
    assert not is_stale(trace, out)
    table = tables / "module_calls.parquet"
    duckdb.sql(f"COPY (SELECT * EXCLUDE (param_dtype, input_dtype, module_class_module) "
               f"FROM read_parquet('{table}')) TO '{tmp_path / 'm.parquet'}' (FORMAT parquet)")
    (tmp_path / "m.parquet").replace(table)
    info = out / "parse_info.json"
    info.write_text(json.dumps({k: v for k, v in json.loads(info.read_text()).items() if k != "tables_schema"}))
    from mlprof.tables.store import TableStore

    with TableStore(tables) as store:
        assert store.rows("SELECT count(param_dtype) FROM module_calls") == [(0,)]
        assert advise(store).findings[0].evidence.metrics["op"] == "aten::mm"
    assert is_stale(trace, out)  # written under another table layout: parse again


def test_the_report_counts_what_the_warnings_explain_once(tmp_path):
    from mlprof.analysis.advisor.explained import explain
    from mlprof.cli.advise import explained_line

    def body(t0):
        return [X("aten::zeros", t0 + 10, 600), X("aten::fill_", t0 + 20, 580), X("aten::sort", t0 + 650, 300)]

    with _store(tmp_path, _steps(body), "two") as store:
        report = advise(store)
    warns = {f.id: f.share for f in report.warnings}
    # memory_churn (60%) and dominant_op on sort (30%) are both compute time: they add up to 90%, no more.
    assert warns == {"memory_churn": pytest.approx(0.6), "dominant_op": pytest.approx(0.3)}
    e = report.explained
    assert e.by_part["compute"]["share"] == pytest.approx(0.9) and e.by_part["python"]["share"] == pytest.approx(0.1)
    # Within one part the largest finding counts (they may overlap): 60%, not 90% (a lower bound).
    assert e.explained_share == pytest.approx(0.6) and e.unexplained_share == pytest.approx(0.4)
    assert explained_line(e).startswith("explained: at least 60% of step time by the warnings (overlaps counted "
                                        "once); up to 40% not explained (compute 30%, python 10%)")
    assert report.to_dict()["explained"]["explained_share"] == pytest.approx(0.6)
    # Nothing warns: nothing is explained; no steps: no account at all.
    assert explain([], report.steps, report.total_step_ns).explained_share == 0
    assert explain([], [], 0) is None


def test_host_waiting_while_the_device_runs_a_collective_is_communication_not_a_sync(tmp_path):
    def body(t0):
        return [X("aten::mm", t0 + 10, 50, **{"External id": t0 + 1}),
                X("cudaLaunchKernel", t0 + 20, 10, cat="cuda_runtime", correlation=t0 + 1, **{"External id": t0 + 1}),
                X("gemm_kernel", t0 + 40, 100, cat="kernel", pid=0, tid=7, device=0, stream=7, correlation=t0 + 1),
                X("nccl:all_reduce", t0 + 100, 30, **{"External id": t0 + 2}),
                X("cudaLaunchKernel", t0 + 110, 10, cat="cuda_runtime", correlation=t0 + 2, **{"External id": t0 + 2}),
                X("ncclDevKernel_AllReduce_Sum_f32_RING_LL", t0 + 150, 600, cat="kernel", pid=0, tid=8, device=0,
                  stream=8, correlation=t0 + 2),
                X("aten::item", t0 + 140, 700), X("aten::_local_scalar_dense", t0 + 141, 698),
                X("cudaStreamSynchronize", t0 + 142, 690, cat="cuda_runtime", correlation=t0 + 3)]

    with _store(tmp_path, _steps(body), "syncomm") as store:
        findings = advise(store).findings
    found = {f.id: f for f in findings}
    # The 698 us blocked in _local_scalar_dense overlaps the 600 us all-reduce: 98 us a step is the sync's own.
    sync = found["synchronization"]
    assert sync.evidence.metrics["blocked_during_communication_ns"] == 5 * 600_000
    assert sync.impact_ns == 5 * 98_000 and sync.severity == "warning"
    assert found["communication_overlap"].severity == "critical"
    # The collective's host op is not a "dominant op" (its kernel is a transfer, not compute).
    assert not [f for f in findings if f.id == "dominant_op" and "nccl" in f.evidence.metrics["op"]]


def _optimizer_step(t0, multi_tensor):
    """An optimizer step of 1 ms updating 100 tensors: one add_ each, 3 us apart."""
    ops = [X("Optimizer.step#Adam.step", t0 + 100, 800, cat="user_annotation")]
    if multi_tensor:
        ops.append(X("aten::_foreach_add_", t0 + 150, 520))
    ops += [X("aten::add_", t0 + 160 + 5 * i, 3) for i in range(100)]
    return ops


def test_a_per_tensor_optimizer_loop_is_an_op_storm_with_the_optimizer_fix(tmp_path):
    with _store(tmp_path, _steps(lambda t0: _optimizer_step(t0, multi_tensor=False)), "loop") as store:
        storm = _ids(store)["op_storm"]
    assert storm.severity in ("critical", "warning") and "optimizer step" in storm.title
    assert "foreach=True" in storm.fix and "Vectorise" not in storm.fix
    assert storm.evidence.metrics["storm_ns_by_phase"].keys() == {"optimizer"}
    # The same per-tensor ops inside one multi-tensor (foreach) call are issued from C++, not from Python.
    with _store(tmp_path, _steps(lambda t0: _optimizer_step(t0, multi_tensor=True)), "foreach") as store:
        assert "op_storm" not in _ids(store)


def test_a_storms_loop_time_is_the_python_between_its_ops_not_the_model_work_between_them(tmp_path):
    def loop(t0):  # 100 tiny ops 5 us apart from Python: 800 of 1000 us are the loop
        return [X("aten::mul", t0 + 100 + 8 * i, 3) for i in range(100)]

    def deep_model(n=5, step_us=10_000):  # 80 layers: a tiny transpose, then a 100 us matmul, in each
        events = []
        for k in range(n):
            t0 = k * step_us
            events.append(X(f"ProfilerStep#{k + 1}", t0, step_us, cat="user_annotation"))
            for i in range(80):
                start = t0 + 100 + 103 * i  # back to back: no Python between layers
                events += [X("aten::linear", start, 103), X("aten::t", start + 1, 2), X("aten::addmm", start + 3, 100)]
        return events

    with _store(tmp_path, _steps(loop), "loop") as store:
        storm = _ids(store)["op_storm"]
    assert storm.share == pytest.approx(0.795, abs=0.01)  # 100 x 3 us of ops + 99 x 5 us of Python
    with _store(tmp_path, deep_model(), "deep") as store:
        # 80 transposes a step are a storm by count, but the matmuls between them are the model's work,
        # not a loop's: 160 us of 10 ms, under the info bar (it was 80% when gaps counted whole).
        assert "op_storm" not in _ids(store)


def _layers(t0, inside: bool, device: bool = False):
    """50 layers a 1 ms step, 8 us of Python apart: two tiny views each (100 a step: a storm by count),
    inside the layer's own op (``inside``: the model's small ops) or issued from Python (a loop); on a
    device run each layer launches a 1 us kernel."""
    ops = []
    for i in range(50):
        start = t0 + 100 + 17 * i
        if inside:
            ops.append(X("aten::linear", start, 9))
        ops += [X("aten::view", start + 1, 2), X("aten::view", start + 5, 2)]
        if device:
            corr = t0 * 100 + i + 1
            ops += [X("cudaLaunchKernel", start + 7, 1, cat="cuda_runtime", correlation=corr),
                    X("gemv_kernel", start + 9, 1, cat="kernel", pid=0, tid=7, device=0, stream=7, correlation=corr)]
    return ops


@pytest.mark.parametrize("device", [False, True])
def test_tiny_ops_inside_the_models_own_ops_are_not_called_a_python_loop(tmp_path, device):
    with _store(tmp_path, _steps(lambda t0: _layers(t0, inside=False, device=device)), "loop") as store:
        loop = _ids(store)["op_storm"]
    assert loop.title.startswith("Host-bound Python loop") and "Vectorise the loop" in loop.fix
    assert loop.evidence.metrics["inside_framework_ops_share"] == 0
    with _store(tmp_path, _steps(lambda t0: _layers(t0, inside=True, device=device)), "layers") as store:
        found = _ids(store)
    own = found["op_storm"]
    assert own.evidence.metrics["inside_framework_ops_share"] == 1
    assert own.title.startswith("Host-bound: ") and "not a Python loop" in own.title and "torch.compile" in own.fix
    assert "Vectorise" not in own.fix
    # Both storms are large (the layers' ops cover part of the gaps, which then are not Python time).
    assert own.share > 0.5 and loop.share > 0.8
    if device:  # the launch-bound idle is the finding there, this is its detail
        assert found["device_idle"].severity in ("critical", "warning")
        assert loop.severity in ("critical", "warning") and own.severity == "info"
    else:
        assert own.severity == loop.severity == "critical"


def test_a_storm_inside_ops_in_the_optimizer_keeps_the_optimizer_fix(tmp_path):
    """Per-tensor updates nested in one larger op (no multi-tensor kernel) are still the optimizer's loop."""
    def body(t0):
        return [X("Optimizer.step#Adam.step", t0 + 100, 800, cat="user_annotation"),
                X("aten::_to_copy", t0 + 150, 700),
                *(X("aten::add_", t0 + 160 + 5 * i, 3) for i in range(100))]

    with _store(tmp_path, _steps(body), "inside") as store:
        storm = _ids(store)["op_storm"]
    assert storm.evidence.metrics["inside_framework_ops_share"] == 1
    assert "optimizer step" in storm.title and "foreach=True" in storm.fix and "not a Python loop" not in storm.title


def test_a_module_called_per_sample_is_a_loop_even_when_its_tiny_ops_are_inside_larger_ones(tmp_path):
    """mlprof's module hooks see the loop: the module is called 100 times a step (one call a view)."""
    from mlprof.parse import ParseOptions, parse_path
    from mlprof.tables.store import TableStore

    from parse.conftest import BASE_NS, make_capture

    at = lambda us: BASE_NS + int(us * 1000)  # noqa: E731
    events, calls = [], []
    for k in range(5):
        t0 = k * STEP_US
        events.append(X(f"ProfilerStep#{k + 1}", t0, STEP_US, cat="user_annotation"))
        events += _layers(t0, inside=True)
        calls += [[1, at(t0 + 100 + 17 * i + d), at(t0 + 104 + 17 * i + d), 11] for i in range(50) for d in (0, 4)]
    capture = make_capture(tmp_path / "cap", {0: {"events": events, "modules": {
        "modules": [["Net", "Net"], ["Net.fc", "Linear"]], "calls": calls}}})
    result = parse_path(capture, ParseOptions())[0]
    with TableStore(result.tables_dir) as store:
        storm = _ids(store)["op_storm"]
    assert storm.evidence.metrics["inside_framework_ops_share"] == 1
    assert storm.title.startswith("Host-bound Python loop") and "Net.fc (Linear) is called 100 times" in storm.title
