"""The configuration rules on real (tiny) torch runs profiled in this process: what they count, never a time."""

from __future__ import annotations

import pytest

import mlprof
from mlprof.analysis.advisor import advise
from mlprof.parse import ParseOptions, parse_path
from mlprof.tables.store import TableStore

torch = pytest.importorskip("torch")


def _profile(tmp_path, body, steps=5) -> TableStore:
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
    x, y = torch.randn(64, 32), torch.randint(0, 4, (64,))
    with mlprof.profile(activities=[mlprof.ProfilerActivity.CPU],
                        schedule=mlprof.schedule(wait=1, warmup=0, active=steps - 1, repeat=1),
                        on_trace_ready=mlprof.tensorboard_trace_handler(tmp_path / "r", worker_name="w",
                                                                        analyse_flag=False)) as prof:
        for _ in range(steps):
            body(model, x, y)
            prof.step()
    return TableStore(parse_path(prof.capture_dir, ParseOptions(output_dir=tmp_path / "out"))[0].tables_dir)


def _evaluate(model, x, y):
    torch.nn.functional.cross_entropy(model(x), y).item()


def _train(model, x, y):
    model.zero_grad()
    torch.nn.functional.cross_entropy(model(x), y).backward()


@pytest.fixture
def anomaly_off():
    yield
    torch.autograd.set_detect_anomaly(False)


def test_an_evaluation_loop_with_grad_on_is_told_to_use_inference_mode(tmp_path):
    with _profile(tmp_path, _evaluate) as store:
        (f,) = [f for f in advise(store).findings if f.id == "grad_without_backward"]
    # 2 linears (aten::t and aten::addmm each), relu, log_softmax, nll_loss: 7 nodes a step, 4 steps. Each
    # .item() carries the number the next node will take: the window's last one (no node took it) is not counted.
    assert f.severity == "info" and f.evidence.metrics["graph_nodes"] == 4 * 7


@pytest.mark.parametrize("body", [lambda m, x, y: torch.no_grad()(_evaluate)(m, x, y),
                                  lambda m, x, y: torch.inference_mode()(_evaluate)(m, x, y), _train],
                         ids=["no_grad", "inference_mode", "training"])
def test_no_graph_or_a_backward_is_silent(tmp_path, body):
    with _profile(tmp_path, body) as store:
        assert "grad_without_backward" not in {f.id for f in advise(store).findings}


def test_anomaly_mode_counts_the_nodes_and_checks_of_a_real_run(tmp_path, anomaly_off):
    torch.autograd.set_detect_anomaly(True)
    with _profile(tmp_path, _train) as store:
        (f,) = [f for f in advise(store).findings if f.id == "anomaly_detection"]
    m = f.evidence.metrics
    assert m["nodes_per_step"] == 7 and m["windows"] == "0" and m["check_nan"] is True
    # One NaN check (isnan, _is_any_true, item) per output of each backward node but the last (AccumulateGrad
    # has none): measured ops, whatever they cost.
    assert m["nan_check_ops"] > 0 and m["nan_check_ops"] % 3 == 0
    assert m["traceback_ns"] > 0 and f.impact_ns == m["traceback_ns"] + m["nan_check_ns"]


def test_without_anomaly_mode_a_real_run_has_no_anomaly_finding(tmp_path):
    with _profile(tmp_path, _train) as store:
        assert "anomaly_detection" not in {f.id for f in advise(store).findings}
