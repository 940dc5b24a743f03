"""The whole-job page (monitor mode): the server's buckets of a long job's steps, and the page in Chromium.

The runs are the synthetic trace of conftest.py with monitor mode's two tables written beside its own
(``replace_table``), as the parser writes them from job_steps.bin and job_monitor.json.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from mlprof.analysis.monitor import SERIES_POINTS, job_step_series
from mlprof.parse import parse_path
from mlprof.tables import TableStore
from mlprof.tables.layout import TABLES_DIR
from mlprof.tables.store import replace_table

from .browser import api, browser, check_charts, page, q, run_url, serve, shot, wait_page  # noqa: F401
from .conftest import make_trace

STEP_NS = 2_000_000
STALL_NS = 50_000_000
STALL_EVERY = 7
# (window, reason, first, last): a baseline early, a window on the stalls.
WINDOWS = [(0, "baseline", 5, 9), (1, "slow_steps", 1_500, 1_530)]


def _monitored_run(root, name: str, steps: int, stall_from: int) -> str:
    """A parsed run whose job_steps hold ``steps`` steps of 2 ms, every 7th from ``stall_from`` at 50 ms."""
    trace = root / f"{name}.pt.trace.json"
    trace.write_text(json.dumps(make_trace()))
    (parsed,) = parse_path(trace)
    out = Path(parsed.output_dir)
    tables = out / TABLES_DIR
    step = np.arange(steps, dtype=np.int64)
    wall = np.full(steps, STEP_NS, dtype=np.int64)
    wall[(step >= stall_from) & ((step - stall_from) % STALL_EVERY == 0)] = STALL_NS
    covered = np.full(steps, np.iinfo(np.int64).min, dtype=np.int64)
    for window, _reason, first, last in WINDOWS:
        covered[(step >= first) & (step <= last)] = window
    replace_table(tables, "job_steps", {
        "step": step, "steps": np.ones(steps, dtype=np.int64), "start_ns": 1_700_000_000_000_000_000 + np.cumsum(wall) - wall,
        "wall_ns": wall, "cpu_ns": wall - 1000, "wait_ns": np.full(steps, 1000, dtype=np.int64),
        "data_ns": np.zeros(steps, dtype=np.int64), "gc_ns": np.zeros(steps, dtype=np.int64),
        "rss_bytes": np.full(steps, 1 << 30, dtype=np.int64), "covered_by_window": covered,
        "warmup": np.zeros(steps, dtype=bool), "trigger": np.array([None] * steps, dtype=object)})
    replace_table(tables, "monitor_windows", {
        "window": np.array([w for w, *_ in WINDOWS] + [np.iinfo(np.int64).min], dtype=np.int64),
        "reason": np.array([r for _, r, *_ in WINDOWS] + ["slow_steps"], dtype=object),
        "detail": np.array(["first steps", "3 slow steps in the last 32", "3 slow steps in the last 32"], dtype=object),
        "trigger_step": np.array([w[2] - 1 for w in WINDOWS] + [2_000], dtype=np.int64),
        "first_step": np.array([w[2] for w in WINDOWS] + [np.iinfo(np.int64).min], dtype=np.int64),
        "last_step": np.array([w[3] for w in WINDOWS] + [np.iinfo(np.int64).min], dtype=np.int64),
        "skipped": np.array([None, None, "the limit of 2 windows"], dtype=object)})
    return out.name


def test_a_long_job_is_drawn_from_at_most_the_series_points_with_every_step_and_its_stalls(tmp_path):
    steps = 400_003  # not a multiple of the bucket width: the last bucket is short
    run = _monitored_run(tmp_path, "long", steps, stall_from=100_000)
    with TableStore(tmp_path / run / TABLES_DIR) as store:
        points = job_step_series(store)
    assert len(points) <= SERIES_POINTS
    assert sum(p["steps"] for p in points) == steps
    assert points[0]["first_step"] == 0 and points[-1]["last_step"] == steps - 1
    assert all(a["last_step"] + 1 == b["first_step"] for a, b in zip(points, points[1:]))
    # Before the stalls every step is 2 ms; after, each bucket of 201 steps holds stalls: the slowest shows
    # them, the median does not, the mean is the exact mean.
    before = [p for p in points if p["last_step"] < 100_000]
    after = [p for p in points if p["first_step"] >= 100_000]
    assert {p["max_ns"] for p in before} == {p["median_ns"] for p in before} == {STEP_NS}
    assert {p["max_ns"] for p in after} == {STALL_NS} and {p["median_ns"] for p in after} == {STEP_NS}
    width = after[0]["steps"]
    stalls = len(range(after[0]["first_step"] + (-(after[0]["first_step"] - 100_000)) % STALL_EVERY,
                       after[0]["last_step"] + 1, STALL_EVERY))
    assert after[0]["mean_ns"] == (stalls * STALL_NS + (width - stalls) * STEP_NS) // width
    assert [p["window"] for p in points if p["window"] is not None][:1] == [0]


def test_a_short_job_is_one_point_per_step(tmp_path):
    run = _monitored_run(tmp_path, "short", 40, stall_from=20)
    with TableStore(tmp_path / run / TABLES_DIR) as store:
        points = job_step_series(store)
    assert [p["first_step"] for p in points] == list(range(40)) and all(p["steps"] == 1 for p in points)
    assert [p["max_ns"] for p in points if p["max_ns"] == STALL_NS] == [STALL_NS] * 3  # 20, 27, 34


@pytest.fixture(scope="module")
def monitored(tmp_path_factory):
    root = tmp_path_factory.mktemp("monitored")
    run = _monitored_run(root, "job", 3_000, stall_from=1_400)
    (plain_out,) = parse_path(_write(root / "plain.pt.trace.json", make_trace()))
    plain = Path(plain_out.output_dir).name
    with serve(root) as url:
        yield url, run, plain


def _write(path, trace):
    path.write_text(json.dumps(trace))
    return path


def test_the_whole_job_page_draws_every_step_marks_the_windows_and_a_click_opens_one(page, monitored):
    url, run, plain = monitored
    answer = api(url, f"/api/data/job_steps?run={q(run)}")
    assert sum(p["steps"] for p in answer) == 3_000 and len(answer) <= SERIES_POINTS
    page.goto(run_url(url, run, "whole_job"))
    wait_page(page, "whole_job")
    check_charts(page, "#page-whole_job")
    assert page.inner_text("#job-steps .tile-value") == "3000"
    assert page.inner_text("#job-windows .tile-value") == "2"
    assert "50 ms" in page.inner_text("#job-slowest .tile-value")
    rows = page.inner_text("#page-whole_job table")
    assert "the limit of 2 windows" in rows and "baseline" in rows
    shot(page, "whole_job")
    # A click inside the shaded slow_steps window picks its first step on the step trace.
    x, y = page.evaluate("""() => {
        const el = document.querySelector('#job-steps-chart .chart'), chart = echarts.getInstanceByDom(el);
        const [x, y] = chart.convertToPixel({xAxisIndex: 0, yAxisIndex: 0}, [1515, 0]);
        const box = el.getBoundingClientRect();
        return [box.left + x, box.top + y - 60]; }""")
    page.mouse.click(x, y)
    page.wait_for_function("() => location.hash.includes('/step_trace?step=1500')")
    page.goto(run_url(url, run, "whole_job"))
    wait_page(page, "whole_job")
    page.click("a.window-link[data-window='0']")
    page.wait_for_function("() => location.hash.includes('/step_trace?step=5')")
    # A run that was not monitored: the page is greyed and says how to monitor.
    page.goto(run_url(url, plain, "whole_job"))
    page.wait_for_selector("#page-na")
    assert "mlprof run --monitor" in page.inner_text("#page-na")
    assert "na" in (page.get_attribute("nav a[data-page=whole_job]", "class") or "").split()
