"""The advisor at Level0 with mlprof's own recorders (no record_shapes): a float64 model and batches whose
size changes every step are named from the module recorder's dtypes and input shapes; controls stay quiet."""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.torch
torch = pytest.importorskip("torch")

import mlprof  # noqa: E402
from mlprof.analysis.advisor import advise  # noqa: E402
from mlprof.parse import ParseOptions, parse_path  # noqa: E402
from mlprof.tables.store import TableStore  # noqa: E402


def _run(out: Path, batches: list[int], dtype=torch.float32, width: int = 512) -> list:
    # One intra-op thread, as in advisor_runs.py: on a shared 2-core machine a second thread makes every
    # matmul wait for the slower of the two, and step times stop following the batch's size.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _profiled_steps(out, batches, dtype, width)
    finally:
        torch.set_num_threads(threads)


def _profiled_steps(out: Path, batches: list[int], dtype, width: int) -> list:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(128, width), torch.nn.ReLU(), torch.nn.Linear(width, 8)).to(dtype)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with mlprof.profile(activities=[mlprof.ProfilerActivity.CPU],
                        experimental_config=mlprof.ExperimentalConfig(record_modules=True),
                        schedule=mlprof.schedule(wait=0, warmup=1, active=len(batches) - 1, repeat=1),
                        on_trace_ready=mlprof.tensorboard_trace_handler(str(out), analyse_flag=False)) as prof:
        for n in batches:
            x = torch.randn(n, 128, dtype=dtype)
            loss = model(x).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            prof.step()
    (cap,) = [p for p in out.iterdir() if p.name.endswith("_mlprof")]
    with TableStore(Path(parse_path(cap, ParseOptions())[0].output_dir) / "tables") as store:
        return advise(store).findings


def _by_id(findings, rule_id):
    return [f for f in findings if f.id == rule_id]


def test_batches_growing_and_shrinking_are_dynamic_shapes_not_outliers(tmp_path):
    findings = _run(tmp_path, [64, 2048, 128, 1536, 96, 2048, 64, 1024])
    (dyn,) = _by_id(findings, "dynamic_shapes")
    assert dyn.severity in ("warning", "critical"), dyn.title
    assert dyn.evidence.metrics["distinct_shapes"] >= 5 and dyn.evidence.metrics["rank_correlation"] >= 0.7
    # The biggest batch is the slowest step, with its element count as evidence.
    assert dyn.evidence.steps[0]["input_elements"] == 2048 * 128
    assert all(f.severity == "info" for f in _by_id(findings, "step_outliers"))


def test_a_fixed_batch_gets_no_dynamic_shapes(tmp_path):
    assert not _by_id(_run(tmp_path, [512] * 8), "dynamic_shapes")


def test_a_float64_model_is_named_from_its_modules(tmp_path):
    findings = _run(tmp_path, [256] * 6, dtype=torch.float64)
    (f,) = _by_id(findings, "slow_dtype")
    assert f.severity in ("warning", "critical") and f.evidence.metrics["measured_by"] == "modules"
    assert f.evidence.call_sites[0]["module"] == "Sequential" and f.evidence.call_sites[0]["dtype"] == "torch.float64"
    assert f.share > 0.5  # forward and backward of the whole model


def test_a_float32_model_gets_no_slow_dtype(tmp_path):
    assert not _by_id(_run(tmp_path, [256] * 6), "slow_dtype")
