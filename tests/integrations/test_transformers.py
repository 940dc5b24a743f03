"""MlprofCallback with a real Hugging Face Trainer (a 2-layer GPT-2 on CPU, synthetic tokens)."""

from __future__ import annotations

import json
import logging
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from mlprof.errors import ConfigError

from .conftest import QUIET, captures, forward_share_of_module_time, free_port, host_phases, \
    monitored_steps_and_windows, parse_capture, \
    window_steps

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("accelerate")

from mlprof.integrations.transformers import MlprofArguments, MlprofCallback  # noqa: E402

from . import hf_job  # noqa: E402

JOB = Path(hf_job.__file__)
ACCUMULATION = 2


@pytest.fixture(scope="module")
def hf_run(tmp_path_factory):
    """One run: 8 optimizer steps of 2 micro-batches of 4 sequences, steps 5-7 profiled, logs every 2 steps."""
    tmp = tmp_path_factory.mktemp("hf")
    callback = MlprofCallback(output_dir=tmp / "prof", start_step=5, active=3, **QUIET)
    trainer = hf_job.train(hf_job.training_args(tmp / "out", gradient_accumulation_steps=ACCUMULATION), [callback])
    (capture,) = captures(tmp / "prof")
    store = parse_capture(capture)
    yield trainer, capture, store
    store.close()


def test_the_steps_asked_for_are_profiled_and_a_step_is_an_optimizer_step(hf_run):
    trainer, capture, store = hf_run
    assert trainer.state.global_step == 8
    assert window_steps(capture) == [[5, 6, 7]]
    assert [r[0] for r in store.rows("SELECT step FROM steps ORDER BY step")] == [5, 6, 7]
    # Each profiled step holds both micro-batches: two forward passes of the model.
    calls = dict(store.rows("SELECT step, count(*) FROM module_calls WHERE module_type = 'GPT2LMHeadModel' "
                            "GROUP BY step"))
    assert calls == {5: ACCUMULATION, 6: ACCUMULATION, 7: ACCUMULATION}


def test_forward_backward_and_optimizer_are_attributed(hf_run):
    _, _, store = hf_run
    phases = host_phases(store)
    for step in (5, 6, 7):
        assert {"forward", "backward", "optimizer"} <= phases[step].keys(), phases[step]
        assert all(phases[step][p] > 0 for p in ("forward", "backward", "optimizer"))
    assert forward_share_of_module_time(store) > 0.95


def test_the_trainers_logs_are_recorded_as_it_logged_them(hf_run):
    trainer, _, store = hf_run
    logged = {(entry["step"], name): value for entry in trainer.state.log_history
              for name, value in entry.items() if name != "step" and isinstance(value, (int, float))}
    recorded = {(step, name): value for step, name, value in
                store.rows("SELECT step, name, value FROM scalars WHERE source = 'transformers'")}
    assert logged and recorded == logged
    assert {"loss", "learning_rate", "grad_norm", "train_samples_per_second"} <= {name for _, name in recorded}


def test_samples_and_tokens_per_second_are_measured_for_every_step(hf_run):
    _, _, store = hf_run
    rates = {}
    for step, name, value in store.rows("SELECT step, name, value FROM scalars WHERE source = 'mlprof'"):
        rates.setdefault(step, {})[name] = value
    assert sorted(rates) == list(range(1, 9))
    for step, values in rates.items():
        assert values["samples_per_second"] > 0
        # Every sequence is SEQ_LEN tokens: the two rates of a step differ by exactly that factor.
        assert values["tokens_per_second"] == pytest.approx(values["samples_per_second"] * hf_job.SEQ_LEN)


def test_metrics_reach_the_timeline_the_csv_and_sqlite(hf_run):
    _, capture, store = hf_run
    out = capture / "mlprof_output"
    trace = json.loads((out / "trace_view.json").read_text())
    counters = {e["name"] for e in trace["traceEvents"] if e.get("ph") == "C" and e.get("cat") == "scalar"}
    assert {"loss", "learning_rate", "samples_per_second"} <= counters
    csv_lines = (out / "training_metrics.csv").read_text().splitlines()
    assert csv_lines[0] == "Step,Name,Value,Source,Time(us)"
    assert len(csv_lines) - 1 == store.count("scalars")
    db = sqlite3.connect(next(out.glob("mlprof_*.db")))
    assert db.execute("SELECT count(*) FROM scalars WHERE name = 'loss'").fetchone()[0] == 4
    db.close()


def test_the_callback_records_the_training_config_in_the_capture(hf_run):
    _, capture, _ = hf_run
    meta = json.loads((capture / "profiler_metadata.json").read_text())["user"]["integration"]
    assert meta["name"] == "transformers" and meta["gradient_accumulation_steps"] == ACCUMULATION
    assert meta["first_step"] == 1 and meta["first_recorded_step"] == 5


def test_bad_options_are_refused_before_training():
    with pytest.raises(ConfigError, match="lvl"):
        MlprofCallback(output_dir="x", lvl="Level1")
    with pytest.raises(ConfigError, match="start_step"):
        MlprofCallback(output_dir="x", start_step=0)
    with pytest.raises(ConfigError, match="not as arguments too"):
        MlprofCallback(config={"profile": True}, start_step=3)


def test_a_failure_inside_the_integration_stops_profiling_not_training(tmp_path, monkeypatch, caplog):
    from mlprof.collect import trainer_session

    def broken(*args, **kwargs):
        raise RuntimeError("injected")

    monkeypatch.setattr(trainer_session, "record_scalars", broken)
    callback = MlprofCallback(output_dir=tmp_path / "prof", start_step=2, active=2, **QUIET)
    with caplog.at_level(logging.ERROR, logger="mlprof"):
        trainer = hf_job.train(hf_job.training_args(tmp_path / "out", max_steps=4), [callback])
    assert trainer.state.global_step == 4
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1 and "injected" in errors[0] and "training continues" in errors[0]
    assert not callback.session.running


def test_an_error_in_the_callbacks_own_code_is_logged_once_and_profiling_stops(tmp_path, monkeypatch, caplog):
    def broken(self, model):
        raise AttributeError("no hooks here")

    monkeypatch.setattr(MlprofCallback, "_count_inputs_of", broken)
    callback = MlprofCallback(output_dir=tmp_path / "prof", start_step=1, active=2, **QUIET)
    with caplog.at_level(logging.ERROR, logger="mlprof"):
        trainer = hf_job.train(hf_job.training_args(tmp_path / "out", max_steps=3), [callback])
    assert trainer.state.global_step == 3
    (error,) = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert "MlprofCallback failed in on_train_begin" in error and "no hooks here" in error
    assert not callback.session.running  # stopped, its open window saved; the conftest checks nothing is attached


def test_an_unwritable_output_switches_profiling_off_and_training_goes_on(tmp_path, caplog):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a directory")
    callback = MlprofCallback(output_dir=blocker / "prof", start_step=1, active=1, **QUIET)
    with caplog.at_level(logging.ERROR, logger="mlprof"):
        trainer = hf_job.train(hf_job.training_args(tmp_path / "out", max_steps=3), [callback])
    assert trainer.state.global_step == 3
    assert any("profiling is switched off" in r.getMessage() for r in caplog.records)


def test_a_config_file_drives_the_callback(tmp_path):
    config = tmp_path / "train.yaml"
    config.write_text(f"""
model: gpt2-tiny
profile: true
profile_start_step: 2
profile_stop_step: 3
init_start_profile: false
profile_output_path: {tmp_path}/output/profile/rank_{{id}}
profile_options: {{host_sys: [], python_sampling: false}}
""")
    hf_job.train(hf_job.training_args(tmp_path / "out", max_steps=4),
                 [MlprofCallback(config=config, analyse=False)])
    (capture,) = captures(tmp_path / "output" / "profile" / "rank_0")
    assert window_steps(capture) == [[2, 3]]


def test_a_start_step_past_the_end_removes_the_empty_capture_and_says_why(tmp_path, caplog):
    callback = MlprofCallback(output_dir=tmp_path / "prof", start_step=50, active=2, **QUIET)
    with caplog.at_level(logging.WARNING, logger="mlprof"):
        hf_job.train(hf_job.training_args(tmp_path / "out", max_steps=2), [callback])
    assert captures(tmp_path / "prof") == []
    assert any("nothing was captured" in r.getMessage() and "start_step" in r.getMessage() for r in caplog.records)


@pytest.mark.slow
@pytest.mark.long  # a 2-rank torchrun job (CI's budget)
def test_torchrun_with_command_line_arguments_gives_one_capture_per_rank(tmp_path):
    prof = tmp_path / "prof"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", "--master_addr=127.0.0.1",
           f"--master_port={free_port()}", str(JOB),
           "--output_dir", str(tmp_path / "out"), "--max_steps", "5", "--per_device_train_batch_size", "2",
           "--gradient_accumulation_steps", "2", "--logging_steps", "1", "--use_cpu", "--report_to", "none",
           "--save_strategy", "no", "--disable_tqdm", "true",
           "--mlprof", "--mlprof_output_dir", f"{prof}/rank_{{id}}", "--mlprof_start_step", "3",
           "--mlprof_active", "2", "--mlprof_options", json.dumps(QUIET)]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=400)
    assert result.returncode == 0, result.stderr[-3000:]
    for rank in (0, 1):
        (capture,) = captures(prof / f"rank_{rank}")
        info = json.loads((capture / "profiler_info.json").read_text())
        assert (info["rank"], info["world_size"]) == (rank, 2)
        assert window_steps(capture) == [[3, 4]]
        store = parse_capture(capture, export_types=("text",))
        logged = json.loads((tmp_path / "out" / f"log_history_rank{rank}.json").read_text())
        losses = {e["step"]: e["loss"] for e in logged if "loss" in e}
        recorded = dict(store.rows("SELECT step, value FROM scalars WHERE name = 'loss'"))
        assert recorded == losses and len(losses) == 5
        store.close()


def test_mlprof_arguments_without_the_switch_add_no_callback():
    assert MlprofArguments().callbacks() == []
    (callback,) = MlprofArguments(mlprof=True, mlprof_start_step=4, mlprof_options='{"level": "Level1"}').callbacks()
    assert callback.options.level == "Level1" and callback.options.skip_first == 2
    with pytest.raises(ConfigError, match="mlprof_options"):
        MlprofArguments(mlprof=True, mlprof_options="{not json").callbacks()


def test_monitor_mode_times_every_trainer_step_and_opens_its_baseline_window(tmp_path):
    # The integration takes mlprof run's options, monitor included: no schedule, the monitor's windows.
    callback = MlprofCallback(output_dir=tmp_path / "prof", monitor=True, **QUIET)
    hf_job.train(hf_job.training_args(tmp_path / "out", max_steps=40), [callback])
    (capture,) = captures(tmp_path / "prof")
    steps, windows = monitored_steps_and_windows(capture)
    assert steps == list(range(steps[0], steps[0] + len(steps))) and len(steps) >= 38  # every step, in order
    assert windows and windows[0][0] == "baseline"
    assert windows[0][1] > steps[0]  # the baseline waits for warm-up steps
