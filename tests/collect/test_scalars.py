"""mlprof.log_scalar: training scalars kept beside the profile, windows or not."""

from __future__ import annotations

import json
import logging
import math

import pytest

import mlprof
from mlprof.collect import scalars
from mlprof.parse import ParseOptions, parse_path
from mlprof.tables.store import TableStore

from .conftest import torch


def segments(capture) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted((capture / "scalars").glob("segment_*.json"))]


def profile_steps(tmp_path, steps: int, log, **schedule):
    prof = mlprof.profile(schedule=mlprof.schedule(**({"wait": 0, "warmup": 1, "active": 2, "repeat": 1,
                                                        "skip_first": 1} | schedule)),
                          on_trace_ready=mlprof.tensorboard_trace_handler(tmp_path / "out", analyse_flag=False),
                          experimental_config=mlprof.ExperimentalConfig(profiler_level="Level_none"))
    with prof:
        for i in range(steps):
            log(i)
            prof.step()
    return prof.capture_dir


def test_log_scalar_without_a_profiler_is_a_no_op():
    assert scalars.active_log() is None
    mlprof.log_scalar("loss", 1.0)
    mlprof.log_scalar("loss", "not a number")  # no session: not even checked


def test_every_step_is_kept_not_only_the_profiled_ones(tmp_path, trainer):
    capture = profile_steps(tmp_path, 6, lambda i: mlprof.log_scalar("loss", torch.tensor(trainer.step())))
    rows = [r for seg in segments(capture) for r in seg["rows"]]
    assert [r[1] for r in rows] == [0, 1, 2, 3, 4, 5]  # the profiler's step when each was logged
    assert [r[3] for r in rows] == pytest.approx(trainer.losses)
    assert {r[0] for r in rows} == {"loss"} and {r[4] for r in rows} == {"user"}
    # One segment when the window was saved (before its parse), one at stop.
    assert len(segments(capture)) == 2 and scalars.active_log() is None


def test_non_finite_values_are_null_and_bad_ones_skipped_with_one_warning(tmp_path, caplog):
    def log(i):
        mlprof.log_scalar("nan", math.nan, step=100 + i)
        mlprof.log_scalar("text", "0.5")
        mlprof.log_scalar("", 1.0)
        mlprof.log_scalar("vector", torch.ones(3))
        mlprof.log_scalar("bad_step", 1.0, step="x")

    with caplog.at_level(logging.WARNING, logger="mlprof"):
        capture = profile_steps(tmp_path, 3, log)
    rows = [r for seg in segments(capture) for r in seg["rows"]]
    assert rows == [["nan", 100 + i, rows[i][2], None, "user"] for i in range(3)]
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 4 and all(w.count("log_scalar") == 1 for w in warnings)


def test_the_capture_keeps_at_most_max_rows_and_counts_the_rest(tmp_path, monkeypatch):
    monkeypatch.setattr(scalars, "MAX_ROWS", 5)
    capture = profile_steps(tmp_path, 4, lambda i: [mlprof.log_scalar("x", j) for j in range(3)])
    segs = segments(capture)
    assert sum(len(s["rows"]) for s in segs) == 5 and sum(s["dropped"] for s in segs) == 7


def test_scalars_are_parsed_into_their_table_at_capture_level(tmp_path):
    capture = profile_steps(tmp_path, 5, lambda i: mlprof.log_scalar("samples_per_second", 10.0 * i))
    (result,) = parse_path(capture, ParseOptions())
    with TableStore(result.tables_dir) as store:
        assert store.rows("SELECT window_index, step, value, source FROM scalars ORDER BY step") == [
            (None, i, 10.0 * i, "user") for i in range(5)]


def test_a_killed_job_keeps_the_segments_written_before(tmp_path):
    """Segments are written once, atomically: a temporary file left by a kill is ignored."""
    capture = profile_steps(tmp_path, 5, lambda i: mlprof.log_scalar("loss", float(i)))
    (capture / "scalars" / ".segment_0002.json.tmp123").write_text('{"rows": [["loss", 9')
    (result,) = parse_path(capture, ParseOptions())
    with TableStore(result.tables_dir) as store:
        assert store.count("scalars") == 5


def test_the_automatic_parse_sees_the_values_logged_after_the_last_window(tmp_path):
    from mlprof.collect.analysis_child import wait_for_analysis

    prof = mlprof.profile(schedule=mlprof.schedule(wait=0, warmup=0, active=1, repeat=1, skip_first=1),
                          on_trace_ready=mlprof.tensorboard_trace_handler(tmp_path / "out"),
                          experimental_config=mlprof.ExperimentalConfig(profiler_level="Level_none"))
    with prof:
        for i in range(5):
            mlprof.log_scalar("loss", float(i))
            prof.step()
    assert wait_for_analysis(timeout_s=120)
    # The tables the collector's own parse wrote, not a parse of ours: all 5 values, not the 2 before the window.
    with TableStore(prof.capture_dir / "mlprof_output" / "tables") as store:
        assert store.count("scalars") == 5
