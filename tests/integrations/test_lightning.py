"""MlprofProfiler with a real Lightning Trainer (fit, validate and test of a small module on CPU)."""

from __future__ import annotations

import csv
import json
import logging

import pytest

from mlprof.errors import ConfigError

from .conftest import QUIET, captures, forward_share_of_module_time, host_phases, monitored_steps_and_windows, \
    parse_capture, window_steps

pytest.importorskip("torch")
pytest.importorskip("lightning")

from mlprof.integrations.lightning import MlprofProfiler  # noqa: E402

from . import pl_job  # noqa: E402

ACCUMULATION = 2


@pytest.fixture(scope="module")
def pl_run(tmp_path_factory):
    """fit (6 optimizer steps of 2 batches, validation every 4 batches), then validate and test; steps 2-3."""
    tmp = tmp_path_factory.mktemp("pl")
    profiler = MlprofProfiler(dirpath=tmp / "prof", start_step=2, active=2, **QUIET)
    trainer = pl_job.trainer(profiler, tmp, accumulate_grad_batches=ACCUMULATION, val_check_interval=4,
                             limit_val_batches=5, limit_test_batches=5)
    module = pl_job.TinyModule()
    trainer.fit(module, pl_job.loader(), pl_job.loader())
    trainer.validate(module, pl_job.loader())
    trainer.test(module, pl_job.loader())
    by_stage = {stage: [c for c in captures(tmp / "prof") if f"_{stage}_" in c.name]
                for stage in ("fit", "validate", "test")}
    stores = {stage: parse_capture(found[0]) for stage, found in by_stage.items() if len(found) == 1}
    yield trainer, by_stage, stores, tmp
    for store in stores.values():
        store.close()


def test_each_stage_is_a_capture_of_its_own_with_the_steps_asked_for(pl_run):
    trainer, by_stage, _, _ = pl_run
    assert trainer.global_step == 6
    assert {stage: len(found) for stage, found in by_stage.items()} == {"fit": 1, "validate": 1, "test": 1}
    for found in by_stage.values():
        assert window_steps(found[0]) == [[2, 3]]


def test_a_fit_step_is_an_optimizer_step_and_validation_is_marked(pl_run):
    _, _, stores, _ = pl_run
    store = stores["fit"]
    per_step = dict(store.rows("""
        SELECT s.step, count(*) FROM markers m JOIN steps s ON m.start_ns >= s.start_ns AND m.start_ns < s.end_ns
        WHERE m.name = '[Strategy]SingleDeviceStrategy.training_step' GROUP BY s.step"""))
    assert per_step == {2: ACCUMULATION, 3: ACCUMULATION}
    # Validation ran after the 4th batch (the end of step 2): inside step 3, marked as one range.
    (validation,) = store.rows("SELECT start_ns, end_ns FROM markers WHERE name = 'validation'")
    (step3,) = store.rows("SELECT start_ns, end_ns FROM steps WHERE step = 3")
    assert step3[0] <= validation[0] < validation[1] <= step3[1]


def test_forward_and_backward_inside_optimizer_step_closure_are_not_optimizer_time(pl_run):
    _, _, stores, _ = pl_run
    store = stores["fit"]
    phases = host_phases(store)
    for step in (2, 3):
        assert all(phases[step].get(p, 0) > 0 for p in ("forward", "backward", "optimizer")), phases[step]
    # Lightning runs training_step and backward inside optimizer.step(closure): the module
    # forward calls there must still be forward, the autograd work backward.
    assert forward_share_of_module_time(store) > 0.95
    (inside,) = store.rows("""SELECT count(*) FROM host_ops WHERE name LIKE 'autograd::engine::evaluate_function%'""")
    assert inside[0] > 0


def test_logged_metrics_equal_what_the_loggers_received(pl_run):
    _, _, stores, tmp = pl_run
    with open(tmp / "logs" / "version_0" / "metrics.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    for stage, name in (("fit", "train_loss"), ("fit", "val_loss"), ("validate", "val_loss"), ("test", "test_loss")):
        recorded = [v for (v,) in stores[stage].rows("SELECT value FROM scalars WHERE name = ? AND source = "
                                                     "'lightning' ORDER BY ts_ns", [name])]
        assert recorded, (stage, name)
    logged = {name: sorted(float(r[name]) for r in rows if r.get(name)) for name in ("train_loss", "val_loss",
                                                                                      "test_loss")}
    recorded_all = {name: sorted(v for store in stores.values() for (v,) in store.rows(
        "SELECT value FROM scalars WHERE name = ? AND source = 'lightning'", [name])) for name in logged}
    assert recorded_all == logged
    # Per-step training values: recorded at the optimizer step they came from (the logger writes step - 1).
    train = dict(stores["fit"].rows("SELECT step, value FROM scalars WHERE name = 'train_loss'"))
    assert train == {int(r["step"]) + 1: float(r["train_loss"]) for r in rows if r.get("train_loss")}


def test_samples_per_second_is_measured_for_every_fit_step(pl_run):
    _, _, stores, _ = pl_run
    steps = [s for (s,) in stores["fit"].rows("SELECT step FROM scalars WHERE name = 'samples_per_second' "
                                              "ORDER BY step")]
    assert steps == [1, 2, 3, 4, 5, 6]


def test_only_the_stages_asked_for_are_profiled(tmp_path):
    profiler = MlprofProfiler(dirpath=tmp_path / "prof", start_step=1, active=1, stages=("test",), **QUIET)
    trainer = pl_job.trainer(profiler, tmp_path, max_steps=2, limit_val_batches=0, limit_test_batches=2)
    module = pl_job.TinyModule()
    trainer.fit(module, pl_job.loader())
    trainer.test(module, pl_job.loader())
    assert [c.name.split("_")[-3] for c in captures(tmp_path / "prof")] == ["test"]


def test_bad_options_and_stages_are_refused_before_training():
    with pytest.raises(ConfigError, match="lvl"):
        MlprofProfiler(dirpath="x", lvl=1)
    with pytest.raises(ConfigError, match="stages"):
        MlprofProfiler(dirpath="x", stages=("train",))


def test_a_failure_inside_the_integration_stops_profiling_not_training(tmp_path, monkeypatch, caplog):
    from mlprof.collect import trainer_session

    def broken(*args, **kwargs):
        raise RuntimeError("injected")

    monkeypatch.setattr(trainer_session, "record_scalars", broken)
    profiler = MlprofProfiler(dirpath=tmp_path / "prof", start_step=1, active=2, **QUIET)
    trainer = pl_job.trainer(profiler, tmp_path, max_steps=4, limit_val_batches=0)
    with caplog.at_level(logging.ERROR, logger="mlprof"):
        trainer.fit(pl_job.TinyModule(), pl_job.loader())
    assert trainer.global_step == 4
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1 and "injected" in errors[0]


@pytest.mark.slow
@pytest.mark.long  # a 2-rank torchrun job (CI's budget)
def test_ddp_under_torchrun_gives_one_fit_capture_per_rank(tmp_path):
    import subprocess
    import sys

    from .conftest import free_port

    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", "--master_addr=127.0.0.1",
           f"--master_port={free_port()}", pl_job.__file__, str(tmp_path / "out"), str(tmp_path / "prof")]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=400)
    assert result.returncode == 0, result.stderr[-3000:]
    for rank in (0, 1):
        (capture,) = captures(tmp_path / "prof" / f"rank_{rank}")
        info = json.loads((capture / "profiler_info.json").read_text())
        assert (info["rank"], info["world_size"]) == (rank, 2)
        assert window_steps(capture) == [[2, 3]]


def test_monitor_mode_times_every_fit_step_and_opens_its_baseline_window(tmp_path):
    profiler = MlprofProfiler(dirpath=tmp_path / "prof", monitor=True, stages=("fit",), **QUIET)
    pl_job.trainer(profiler, tmp_path, max_steps=40, limit_val_batches=0).fit(
        pl_job.TinyModule(), pl_job.loader(n=2048))
    (capture,) = captures(tmp_path / "prof")
    steps, windows = monitored_steps_and_windows(capture)
    assert steps == list(range(steps[0], steps[0] + len(steps))) and len(steps) >= 38  # every step, in order
    assert windows and windows[0][0] == "baseline" and windows[0][1] > steps[0]
