"""Golden tests of the configuration rules (rules_config.py): hand-built captures whose torch settings and
environment are known, with known times -> the exact finding."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mlprof.analysis.advisor import AdvisorContext, advise
from mlprof.analysis.advisor.rules_config import anomaly_cost_by_op
from mlprof.parse import ParseOptions, parse_path
from mlprof.tables.store import TableStore
from trace_events import BASE_NS, X

STEP_US = 10_000

# The settings a window records (collect/torch_state.py) on a plain CPU run.
PLAIN = {"anomaly_enabled": False, "anomaly_check_nan": True, "deterministic_algorithms": False,
         "deterministic_warn_only": False, "grad_enabled": True, "inference_mode": False, "num_threads": 2,
         "num_interop_threads": 2, "float32_matmul_precision": "highest", "cuda_matmul_allow_tf32": False,
         "cudnn_enabled": True, "cudnn_benchmark": False, "cudnn_deterministic": False, "cudnn_allow_tf32": True}


def _capture(tmp_path: Path, events: list[dict], state: dict | None = None, env: dict | None = None,
             changed: dict | None = None, name: str = "c") -> TableStore:
    """A one-window capture (docs/capture_format.md) whose profiler_metadata.json holds ``state`` and ``env``."""
    root = tmp_path / name
    window = root / "raw" / "window_0000"
    window.mkdir(parents=True)
    (root / "profiler_info.json").write_text(json.dumps({
        "schema_version": 1, "kind": "mlprof.capture", "status": "finished", "worker_name": "w", "host": "h",
        "pid": 1, "rank": 0, "world_size": 1, "local_rank": 0, "versions": {"mlprof": "0.1.0"}, "config": {},
        "clock": {"wall_ns": 0, "monotonic_ns": 0}, "created_wall_ns": BASE_NS,
        "windows": [{"index": 0, "dir": "raw/window_0000", "status": "complete"}], "error": None}))
    torch_state = [] if state is None else [{"window": 0, "at_start": state, "changed": changed or {}}]
    (root / "profiler_metadata.json").write_text(json.dumps(
        {"user": {}, "environment": env or {}, "system": {"cpu_count": 2}, "torch_state": torch_state}))
    (window / "kineto.pt.trace.json").write_text(json.dumps(
        {"schemaVersion": 1, "baseTimeNanoseconds": BASE_NS, "traceEvents": events}))
    (window / "window.json").write_text(json.dumps(
        {"index": 0, "status": "complete", "level": "Level0", "files": {"kineto": "kineto.pt.trace.json"}}))
    return TableStore(parse_path(root, ParseOptions(output_dir=tmp_path / f"{name}_out"))[0].tables_dir)


def _anomaly_steps(n_steps=4, creators=80, creator_us=40, nan_us=(50, 30, 10)):
    """Each 10 ms step: ``creators`` tiny graph-building ops (aten::t, one autograd node each, every one
    ``creator_us`` long: the traceback anomaly mode records) from a Python loop, then a backward whose one
    node is followed by the engine's NaN check (isnan, _is_any_true, item under evaluate_function); 5 ms of
    matmuls (carrying no sequence number, as ops under an autograd kernel do) fill the rest."""
    events, seq = [], 0
    for i in range(n_steps):
        t0 = i * STEP_US
        events.append(X(f"ProfilerStep#{i + 1}", t0, STEP_US, cat="user_annotation"))
        for k in range(creators):
            events.append(X("aten::t", t0 + 100 + k * 50, creator_us, **{"Sequence number": seq, "Fwd thread id": 0}))
            seq += 1
        events.append(X("aten::mm", t0 + 4_200, 1_700))  # the model's real work, before and after backward
        b0 = t0 + 6_000
        events.append(X("autograd::engine::evaluate_function: TBackward0", b0, 500,
                        **{"Sequence number": seq - 1, "Fwd thread id": 1}))
        events.append(X("TBackward0", b0 + 10, 100, **{"Sequence number": seq - 1, "Fwd thread id": 1}))
        t = b0 + 200
        for name, dur in zip(("aten::isnan", "aten::_is_any_true", "aten::item"), nan_us):
            events.append(X(name, t, dur))
            if name == "aten::isnan":
                events.append(X("aten::ne", t + 5, dur - 10))  # the op isnan runs, under it
            t += dur + 5
        events.append(X("aten::mm", t0 + 6_600, 3_300))
    return events


def test_anomaly_mode_is_charged_its_tracebacks_and_nan_checks_and_leads(tmp_path):
    with _capture(tmp_path, _anomaly_steps(), {**PLAIN, "anomaly_enabled": True}) as store:
        report = advise(store)
    top = report.findings[0]
    assert top.id == "anomaly_detection" and top.severity == "critical"
    m = top.evidence.metrics
    # 80 creators a step of 40 us each (their median: the cost of one traceback), 4 steps.
    assert m["traceback_ns"] == 4 * 80 * 40_000 and m["nodes_per_step"] == 80
    assert m["traceback_ns_per_node"] == 40_000
    assert m["nan_check_ns"] == 4 * 90_000 and m["nan_check_ops"] == 12
    assert top.impact_ns == 4 * (80 * 40_000 + 90_000)
    assert top.share == pytest.approx(top.impact_ns / (4 * STEP_US * 1000), abs=1e-4)
    assert top.evidence.ops[0] == {"name": "aten::t", "anomaly_ns": 4 * 80 * 40_000}
    # The tiny ops are still reported, but as anomaly detection's cost, not as a loop to vectorise.
    # So are the op it inflated (aten::t: every call is a node creator) and the storm of them.
    for rule in ("op_storm", "dominant_op"):
        (f,) = [f for f in report.findings if f.id == rule and f.evidence.metrics.get("op", "aten::t") == "aten::t"]
        assert f.severity == "info" and "anomaly detection's tracebacks" in f.title, rule
        assert f.fix.startswith("Turn anomaly detection off first") and f.evidence.metrics["anomaly_detection_ns"]
    assert report.warnings == [top]
    # Per op name, what is anomaly detection's: every creator's traceback, and the checks' ops to the leaves.
    with _capture(tmp_path, _anomaly_steps(), {**PLAIN, "anomaly_enabled": True}, name="again") as store:
        by_op = anomaly_cost_by_op(AdvisorContext(store))
    assert by_op == {"aten::t": 4 * 80 * 40_000, "aten::isnan": 4 * 10_000, "aten::ne": 4 * 40_000,
                     "aten::_is_any_true": 4 * 30_000, "aten::item": 4 * 10_000}


def test_a_creators_own_work_is_not_charged_to_anomaly_mode(tmp_path):
    # Per step 5 views of 90 us (a traceback, nothing else) and 2 matmuls of 160 us (70 us of work each).
    events, seq = [], 0
    for i in range(3):
        t0 = i * STEP_US
        events.append(X(f"ProfilerStep#{i + 1}", t0, STEP_US, cat="user_annotation"))
        for k, (name, dur) in enumerate([("aten::view", 90)] * 5 + [("aten::addmm", 160)] * 2):
            events.append(X(name, t0 + 100 + k * 200, dur, **{"Sequence number": seq, "Fwd thread id": 0}))
            seq += 1
        events.append(X("aten::mm", t0 + 2_000, 7_900))
    with _capture(tmp_path, events, {**PLAIN, "anomaly_enabled": True}) as store:
        (f,) = [f for f in advise(store).findings if f.id == "anomaly_detection"]
    m = f.evidence.metrics
    assert m["traceback_ns_per_node"] == 90_000 and m["traceback_ns"] == 3 * 7 * 90_000
    assert m["nan_check_ns"] == 0 and f.impact_ns == 3 * 7 * 90_000


def test_without_anomaly_mode_the_same_trace_is_an_op_storm(tmp_path):
    with _capture(tmp_path, _anomaly_steps(), PLAIN) as store:
        report = advise(store)
    assert "anomaly_detection" not in {f.id for f in report.findings}
    assert report.findings[0].id == "op_storm" and report.findings[0].severity == "critical"
    assert "anomaly" not in report.findings[0].title


def test_anomaly_mode_switched_on_inside_the_window_is_seen(tmp_path):
    with _capture(tmp_path, _anomaly_steps(), PLAIN, changed={"anomaly_enabled": [False, True]}) as store:
        (f,) = [f for f in advise(store).findings if f.id == "anomaly_detection"]
    assert f.evidence.metrics["windows"] == "0"


def test_anomaly_mode_with_nothing_to_measure_is_info(tmp_path):
    # Steps without graph-building ops or backward (a Level_none-like trace): the mode and its fix only.
    events = [X(f"ProfilerStep#{i + 1}", i * STEP_US, STEP_US, cat="user_annotation") for i in range(3)]
    events += [X("aten::mm", i * STEP_US + 10, 1_000) for i in range(3)]
    with _capture(tmp_path, events, {**PLAIN, "anomaly_enabled": True}) as store:
        (f,) = [f for f in advise(store).findings if f.id == "anomaly_detection"]
    assert f.severity == "info" and f.impact_ns == 0 and "not measurable" in f.title


def _gpu_steps(n_steps=4, launch_us=2_000, conv=False):
    events, corr = [], 100
    for i in range(n_steps):
        t0 = i * STEP_US
        events.append(X(f"ProfilerStep#{i + 1}", t0, STEP_US, cat="user_annotation"))
        events.append(X("aten::convolution" if conv else "aten::mm", t0 + 100, launch_us + 200,
                        **{"External id": corr}))
        events.append(X("cudaLaunchKernel", t0 + 150, launch_us, cat="cuda_runtime", correlation=corr,
                        **{"External id": corr}))
        events.append(X("gemm_kernel", t0 + 200, max(launch_us - 100, 50), cat="kernel", pid=0, tid=7, device=0, stream=7,
                        correlation=corr))
        corr += 10
    return events


def test_launch_blocking_is_charged_the_launches_waiting_time(tmp_path):
    with _capture(tmp_path, _gpu_steps(), PLAIN, env={"CUDA_LAUNCH_BLOCKING": "1"}) as store:
        (f,) = [f for f in advise(store).findings if f.id == "launch_blocking"]
    # Each 2 ms launch is 1.98 ms beyond a normal (20 us) one: 19.8% of each 10 ms step.
    assert f.impact_ns == 4 * 1_980_000 and f.share == pytest.approx(0.198) and f.severity == "warning"
    assert f.evidence.metrics["launches"] == 4 and "Unset CUDA_LAUNCH_BLOCKING" in f.fix


@pytest.mark.parametrize("value", ["0", ""])
def test_launch_blocking_off_is_silent(tmp_path, value):
    with _capture(tmp_path, _gpu_steps(), PLAIN, env={"CUDA_LAUNCH_BLOCKING": value}) as store:
        assert "launch_blocking" not in {f.id for f in advise(store).findings}


def test_debug_variables_are_info_with_their_fixes(tmp_path):
    env = {"TORCH_DISTRIBUTED_DEBUG": "DETAIL", "NCCL_DEBUG": "INFO", "TORCH_SHOW_CPP_STACKTRACES": "1",
           "PYTHONTRACEMALLOC": "5", "OMP_NUM_THREADS": "2"}
    with _capture(tmp_path, _gpu_steps(launch_us=10), PLAIN, env=env) as store:
        (f,) = [f for f in advise(store).findings if f.id == "debug_environment"]
    assert f.severity == "info" and f.share == 0.0
    assert f.evidence.metrics == {"TORCH_DISTRIBUTED_DEBUG": "DETAIL", "NCCL_DEBUG": "INFO",
                                  "TORCH_SHOW_CPP_STACKTRACES": "1", "PYTHONTRACEMALLOC": "5"}
    assert "NCCL_DEBUG: unset it or set WARN; it logs every communicator" in f.fix


def test_quiet_debug_variables_are_silent(tmp_path):
    env = {"TORCH_DISTRIBUTED_DEBUG": "OFF", "NCCL_DEBUG": "WARN", "TORCH_SHOW_CPP_STACKTRACES": "0"}
    with _capture(tmp_path, _gpu_steps(launch_us=10), PLAIN, env=env) as store:
        assert "debug_environment" not in {f.id for f in advise(store).findings}


def test_backend_settings_on_a_gpu_run(tmp_path):
    state = {**PLAIN, "deterministic_algorithms": True, "cudnn_benchmark": False}
    with _capture(tmp_path, _gpu_steps(launch_us=10, conv=True), state, name="conv") as store:
        found = {f.id: f for f in advise(store).findings}
    assert found["deterministic_algorithms"].severity == "info"
    assert found["cudnn_benchmark_off"].evidence.metrics["convolutions"] == 4
    assert "tf32_off" not in found  # no matmul
    with _capture(tmp_path, _gpu_steps(launch_us=10), PLAIN, name="mm") as store:
        found = {f.id: f for f in advise(store).findings}
    assert found["tf32_off"].evidence.metrics["matmuls"] == 4 and "cudnn_benchmark_off" not in found
    with _capture(tmp_path, _gpu_steps(launch_us=10), {**PLAIN, "float32_matmul_precision": "high"},
                  name="tf32") as store:
        assert "tf32_off" not in {f.id for f in advise(store).findings}


def test_backend_settings_are_silent_on_a_cpu_run_and_a_plain_trace(tmp_path):
    events = [X(f"ProfilerStep#{i + 1}", i * STEP_US, STEP_US, cat="user_annotation") for i in range(3)]
    events += [X("aten::convolution", i * STEP_US + 10, 1_000) for i in range(3)]
    with _capture(tmp_path, events, PLAIN, name="cpu") as store:
        ids = {f.id for f in advise(store).findings}
    assert not ids & {"cudnn_benchmark_off", "tf32_off", "deterministic_algorithms"}
    with _capture(tmp_path, events, None, name="bare") as store:
        assert not {f.id for f in advise(store).findings} & {"anomaly_detection", "deterministic_algorithms"}


def _forward_only(n_steps=3, seq_step=1, backward=False):
    """Steps of a forward: 3 ops carrying autograd sequence numbers (``seq_step`` 0: all the same, nothing
    requires grad), optionally a backward node."""
    events, seq = [], 0
    for i in range(n_steps):
        t0 = i * STEP_US
        events.append(X(f"ProfilerStep#{i + 1}", t0, STEP_US, cat="user_annotation"))
        for k, name in enumerate(("aten::t", "aten::addmm", "aten::relu")):
            events.append(X(name, t0 + 100 + k * 1_000, 500, **{"Sequence number": seq, "Fwd thread id": 0}))
            seq += seq_step
        if backward:
            events.append(X("autograd::engine::evaluate_function: AddmmBackward0", t0 + 5_000, 500,
                            **{"Sequence number": 1, "Fwd thread id": 1}))
    return events


def test_an_inference_loop_building_a_graph_is_info(tmp_path):
    with _capture(tmp_path, _forward_only(), PLAIN) as store:
        (f,) = [f for f in advise(store).findings if f.id == "grad_without_backward"]
    # 9 distinct numbers, the window's last not yet a node's: 8 nodes over 3 steps.
    assert f.severity == "info" and f.evidence.metrics["graph_nodes"] == 8
    assert "inference_mode" in f.fix


@pytest.mark.parametrize("seq_step,backward", [(1, True), (0, False)])
def test_training_or_frozen_weights_are_not_inference_with_grad(tmp_path, seq_step, backward):
    with _capture(tmp_path, _forward_only(seq_step=seq_step, backward=backward), PLAIN) as store:
        assert "grad_without_backward" not in {f.id for f in advise(store).findings}


def test_compare_warns_when_the_torch_settings_differ(tmp_path):
    from mlprof.analysis.compare import compare

    events = [X(f"ProfilerStep#{i + 1}", i * STEP_US, STEP_US, cat="user_annotation") for i in range(3)]
    events += [X("aten::mm", i * STEP_US + 10, 9_000) for i in range(3)]
    with _capture(tmp_path, events, PLAIN, name="base") as base, \
            _capture(tmp_path, events, {**PLAIN, "anomaly_enabled": True}, name="new") as new, \
            _capture(tmp_path, events, PLAIN, name="same") as same:
        differ, alike = compare(base, new), compare(base, same)
    (warning,) = [w for w in differ.warnings if "torch settings" in w]
    assert "base anomaly_enabled=False" in warning and "new anomaly_enabled=True" in warning
    assert not [w for w in alike.warnings if "torch settings" in w]
