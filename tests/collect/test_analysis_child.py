"""analyse_flag: each finished window is parsed by a child process, off the training thread."""

from __future__ import annotations

import csv
import os

import mlprof
from mlprof.collect import analysis_child

from .conftest import load_json


def test_windows_are_parsed_in_a_child_process(tmp_path, trainer):
    with mlprof.profile(
        activities=[mlprof.ProfilerActivity.CPU],
        schedule=mlprof.schedule(wait=1, warmup=1, active=2, repeat=2),
        on_trace_ready=mlprof.tensorboard_trace_handler(tmp_path, analyse_flag=True),
    ) as prof:
        for _ in range(10):
            trainer.step()
            prof.step()
        children = list(analysis_child._children)
    assert children and all(child.pid != os.getpid() for child in children)
    assert all(str(prof.capture_dir) in child.args for child in children)
    assert analysis_child.wait_for_analysis(timeout_s=300)
    assert all(child.returncode == 0 for child in children), (prof.capture_dir / "logs" / "analyse.log").read_text()

    output = prof.capture_dir / "mlprof_output"
    with open(output / "step_trace_time.csv", newline="") as f:
        steps = [int(row["Step"]) for row in csv.DictReader(f)]
    assert steps == [2, 3, 6, 7], "both windows' steps should be parsed"
    assert load_json(output / "trace_view.json")["traceEvents"]


def test_no_child_without_analyse_flag(tmp_path, trainer):
    before = len(analysis_child._children)
    with mlprof.profile(
        activities=[mlprof.ProfilerActivity.CPU],
        on_trace_ready=mlprof.tensorboard_trace_handler(tmp_path, analyse_flag=False),
    ) as prof:
        trainer.step()
    assert len(analysis_child._children) == before
    assert not (prof.capture_dir / "mlprof_output").exists()


def test_windows_closing_faster_than_they_parse_do_not_pile_up_parsers(tmp_path, trainer):
    with mlprof.profile(
        activities=[mlprof.ProfilerActivity.CPU],
        schedule=mlprof.schedule(wait=0, warmup=0, active=1, repeat=0),
        on_trace_ready=mlprof.tensorboard_trace_handler(tmp_path, analyse_flag=True),
    ) as prof:
        for _ in range(12):
            trainer.step()
            prof.step()
            live = [c for c in analysis_child._children if c.poll() is None]
            assert len(live) <= 1, "a second parser started while one was still running"
    assert analysis_child.wait_for_analysis(timeout_s=300)
    with open(prof.capture_dir / "mlprof_output" / "step_trace_time.csv", newline="") as f:
        assert [int(row["Step"]) for row in csv.DictReader(f)] == list(range(13))


def test_a_trainer_run_is_parsed_once_with_what_it_logged_after_the_window(tmp_path, trainer):
    """Issue 34: logs/analyse.log of a trainer run showed two "parsed in" lines: one at the window's end,
    one at stop for the scalars logged since. One window: one parse, at stop, with every value."""
    from mlprof.collect.trainer_session import TrainerSession
    from mlprof.integrations._common import integration_options
    from mlprof.tables.store import TableStore

    session = TrainerSession(integration_options(tmp_path / "prof", 3, 2, None, {}).options, integration="test")
    session.start(1)
    for step in range(1, 13):
        trainer.step()
        session.log({"loss": 1.0 / step}, step, "test")
        session.end_step(4, None)
    capture = session.capture_dir
    session.stop()
    assert analysis_child.wait_for_analysis(timeout_s=300)
    log = (capture / "logs" / "analyse.log").read_text()
    assert log.count("parsed in") == 1, log
    with TableStore(capture / "mlprof_output" / "tables") as store:
        # Logged at every step, window or not: the values after the window are in the one parse.
        assert store.rows("SELECT count(*) FROM scalars WHERE name = 'loss'")[0][0] == 12
        assert store.rows("SELECT max(step) FROM scalars WHERE name = 'loss'")[0][0] == 12
