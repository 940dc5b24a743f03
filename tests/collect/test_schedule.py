"""Which steps land in which capture window: torch's schedule semantics."""

from __future__ import annotations

import itertools

import pytest

import mlprof
from mlprof.errors import ConfigError

from .conftest import load_json, profiler_steps_in_trace, windows_of


def expected_windows(wait, warmup, active, repeat, skip_first, total_steps):
    """Windows spelled out by hand from the schedule's definition."""
    windows, step = [], skip_first
    cycle = 0
    while step < total_steps and (repeat == 0 or cycle < repeat):
        start = step + wait + warmup
        window = [s for s in range(start, start + active) if s < total_steps]
        windows.append(window)
        step = start + active
        cycle += 1
    return windows


def test_schedule_matches_torch_schedule_step_by_step():
    torch_schedule = pytest.importorskip("torch").profiler.schedule
    for wait, warmup, active, repeat, skip_first in itertools.product(range(3), range(3), (1, 2, 3), range(3), range(3)):
        ours = mlprof.schedule(wait=wait, warmup=warmup, active=active, repeat=repeat, skip_first=skip_first)
        theirs = torch_schedule(wait=wait, warmup=warmup, active=active, repeat=repeat, skip_first=skip_first)
        for step in range(30):
            assert ours(step).name == theirs(step).name, (wait, warmup, active, repeat, skip_first, step)


@pytest.mark.parametrize("bad", [dict(wait=-1, active=1), dict(wait=0, active=0), dict(wait=0, active=1, repeat=1.5)])
def test_invalid_schedule_is_refused_with_a_clear_message(bad):
    with pytest.raises(ConfigError, match="schedule"):
        mlprof.schedule(**bad)


@pytest.mark.parametrize(
    "wait,warmup,active,repeat,skip_first",
    [(1, 1, 2, 2, 1), (0, 0, 1, 3, 0), (2, 1, 3, 0, 0), (0, 1, 2, 1, 3)],
)
def test_profiler_steps_land_in_the_windows_the_schedule_names(tmp_path, trainer, wait, warmup, active, repeat, skip_first):
    total = 14
    handler = mlprof.tensorboard_trace_handler(tmp_path, analyse_flag=False)
    sched = mlprof.schedule(wait=wait, warmup=warmup, active=active, repeat=repeat, skip_first=skip_first)
    with mlprof.profile(activities=[mlprof.ProfilerActivity.CPU], schedule=sched, on_trace_ready=handler) as prof:
        for _ in range(total):
            trainer.step()
            prof.step()
    expected = expected_windows(wait, warmup, active, repeat, skip_first, total)
    # A cycle cut short by stop() is still saved, as torch does.
    expected = [w for w in expected if w]
    windows = windows_of(prof.capture_dir)
    assert [profiler_steps_in_trace(w / "kineto.pt.trace.json") for w in windows] == expected
    assert [[s["step"] for s in load_json(w / "steps.json")] for w in windows] == expected
    info = load_json(prof.capture_dir / "profiler_info.json")
    assert [(w["first_step"], w["last_step"]) for w in info["windows"]] == [(w[0], w[-1]) for w in expected]
    assert all(w["status"] == "complete" for w in info["windows"])


def test_a_step_cut_by_stop_is_marked_partial_and_parsed_as_no_step(tmp_path, trainer):
    # Four whole steps, then step() begins a fifth that the profile's end cuts at once: torch's trace holds
    # ProfilerStep#4 all the same; mlprof marks its record partial and the parser leaves it out.
    from mlprof.parse import ParseOptions, parse_path
    from mlprof.tables.store import TableStore

    handler = mlprof.tensorboard_trace_handler(tmp_path, analyse_flag=False)
    sched = mlprof.schedule(wait=0, warmup=0, active=10)
    with mlprof.profile(activities=[mlprof.ProfilerActivity.CPU], schedule=sched, on_trace_ready=handler) as prof:
        for _ in range(4):
            trainer.step()
            prof.step()
    (window,) = windows_of(prof.capture_dir)
    assert profiler_steps_in_trace(window / "kineto.pt.trace.json") == [0, 1, 2, 3, 4]
    records = load_json(window / "steps.json")
    assert [(r["step"], r.get("partial", False)) for r in records] == [(0, False), (1, False), (2, False),
                                                                        (3, False), (4, True)]
    (result,) = parse_path(prof.capture_dir, ParseOptions(output_dir=tmp_path / "parsed"))
    with TableStore(result.tables_dir) as store:
        assert [r[0] for r in store.rows("SELECT step FROM steps ORDER BY step")] == [0, 1, 2, 3]


def test_a_profile_stopped_before_any_step_keeps_its_one_step_whole(tmp_path, trainer):
    # start() and stop() with no step() between: the window's one step is all it has, not a piece of one.
    handler = mlprof.tensorboard_trace_handler(tmp_path, analyse_flag=False)
    with mlprof.profile(activities=[mlprof.ProfilerActivity.CPU], on_trace_ready=handler) as prof:
        trainer.step()
    (window,) = windows_of(prof.capture_dir)
    (record,) = load_json(window / "steps.json")
    assert record["step"] == 0 and record["partial"] is False
