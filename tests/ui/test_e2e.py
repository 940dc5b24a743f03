"""The dashboard in a real headless Chromium (Debian's, driven by Playwright).

Skips when /usr/bin/chromium or Playwright is missing (scripts/install_browser.sh
installs the browser). Screenshots go to the test's tmp dir; the checks read
real content: table rows against the API's data, canvas pixels that are not
background.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

CHROMIUM = os.environ.get("MLPROF_CHROMIUM", "/usr/bin/chromium")
if not Path(CHROMIUM).is_file():
    pytest.skip(f"{CHROMIUM} not found: run scripts/install_browser.sh (Debian chromium)", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright (the project's test extra)")
uvicorn = pytest.importorskip("uvicorn")

from mlprof.parse import parse_path  # noqa: E402
from mlprof.ui.server import create_app  # noqa: E402

from .conftest import OPS_PER_STEP, STEPS, make_trace  # noqa: E402

ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        "--disable-dev-shm-usage"]
TIMEOUT_MS = 20_000


@contextlib.contextmanager
def serve(logdir: Path):
    """The dashboard over ``logdir`` on a free loopback port, stopped at the end."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    server = uvicorn.Server(uvicorn.Config(create_app(logdir), log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    for _ in range(200):  # bounded wait for start-up
        if server.started:
            break
        time.sleep(0.05)
    assert server.started
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


@pytest.fixture(scope="module")
def base_url(logdir):
    with serve(logdir) as url:
        yield url


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    pg = context.new_page()
    pg.set_default_timeout(TIMEOUT_MS)
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    pg.errors = errors
    yield pg
    context.close()
    assert errors == [], errors  # no script error, no CSP violation, no failed load


@pytest.fixture
def shots(tmp_path) -> Path:
    """Where screenshots go: MLPROF_UI_SCREENSHOTS=DIR keeps them for a person to look at."""
    keep = os.environ.get("MLPROF_UI_SCREENSHOTS")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        return Path(keep)
    return tmp_path


def api(base_url, path):
    with urllib.request.urlopen(base_url + path, timeout=10) as r:
        return json.loads(r.read())


def run_url(base_url, run_id, page_name, query=""):
    return f"{base_url}/#/run/{urllib.parse.quote(run_id, safe='')}/{page_name}{query}"


def canvas_ink(pg, selector) -> int:
    """Pixels of the canvas that are not the white background."""
    return pg.evaluate("""sel => {
        const c = document.querySelector(sel), d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
        let n = 0;
        for (let i = 0; i < d.length; i += 4) if (d[i] < 235 || d[i + 1] < 235 || d[i + 2] < 235) n++;
        return n; }""", selector)


def test_run_list_loads_and_a_run_opens(page, base_url, shots):
    page.goto(base_url + "/")
    link = page.wait_for_selector("a.run-link")
    assert link.inner_text() == "jobs/train"
    assert "later.pt.trace.json" in page.inner_text("#runs")
    page.screenshot(path=str(shots / "runs.png"))
    link.click()
    page.wait_for_selector("#page-overview")
    assert page.inner_text("#page-overview h1") == "Overview"
    bars = page.query_selector_all("#page-overview svg.stacked rect")
    assert len(bars) >= STEPS  # at least one segment per step
    assert len(page.query_selector_all("#page-overview svg.pie path")) >= 3
    assert page.query_selector("#advisor-findings, #advisor-none") is not None
    page.screenshot(path=str(shots / "overview.png"), full_page=True)


def test_op_table_sorts_filters_and_drills_down(page, base_url, run_id):
    rows = api(base_url, f"/api/data/op_statistic?run={urllib.parse.quote(run_id)}")
    page.goto(run_url(base_url, run_id, "operators"))
    page.wait_for_selector("#page-operators")
    table = "#page-operators section.card:has(h2:text-matches('All operators')) "
    first = lambda: page.inner_text(table + "tbody tr:first-child td:first-child")  # noqa: E731
    assert first() == max(rows, key=lambda r: r["host_self_ns"])["name"]
    page.click(table + "th[data-key=name]")
    # Names sort as people read them (the browser's locale order: case-insensitive).
    assert first() == min((r["name"] for r in rows), key=str.lower)
    page.click(table + "th[data-key=name]")
    assert first() == max((r["name"] for r in rows), key=str.lower)
    page.fill(table + "input[type=search]", "conv2d")
    shown = page.query_selector_all(table + "tbody tr")
    assert [r.query_selector("td").inner_text() for r in shown] == ["aten::conv2d"]
    assert page.inner_text(table + ".table-info").startswith("1 of 1 rows")
    shown[0].click()
    page.wait_for_selector("#op-drill tbody tr")
    assert len(page.query_selector_all("#op-drill section:first-child tbody tr")) == 2  # two input shapes
    page.click("#op-drill section:first-child tbody tr:first-child")
    page.wait_for_selector("#op-calls tbody tr")
    assert len(page.query_selector_all("#op-calls tbody tr")) == STEPS


def test_download_links_return_the_shown_data(page, base_url, run_id):
    page.goto(run_url(base_url, run_id, "kernels"))
    page.wait_for_selector("#page-kernels")
    links = page.query_selector_all("#page-kernels a[data-format=csv]")
    assert links
    for link in links:
        r = page.request.get(base_url + link.get_attribute("href"))
        assert r.ok and r.headers["content-type"].startswith("text/csv")
        assert len(r.text().splitlines()) > 1
    body = page.request.get(base_url + page.get_attribute("#page-kernels a[data-format=json]", "href")).json()
    shown = page.query_selector_all("#page-kernels section:nth-of-type(2) tbody tr")
    assert len(shown) == len(body)


def test_timeline_draws_zooms_pans_and_shows_details(page, base_url, run_id, shots):
    page.goto(run_url(base_url, run_id, "timeline"))
    page.wait_for_selector("#tl-canvas[data-answers]")
    canvas = page.query_selector("#tl-canvas")
    assert int(canvas.get_attribute("data-drawn")) > 0
    assert canvas_ink(page, "#tl-canvas") > 5_000
    page.screenshot(path=str(shots / "timeline.png"))
    span = int(canvas.get_attribute("data-t1")) - int(canvas.get_attribute("data-t0"))
    requests = int(canvas.get_attribute("data-requests"))
    page.click("#tl-canvas", position={"x": 5, "y": 5})  # focus (label column: no selection)
    for _ in range(6):
        page.keyboard.press("w")
    page.wait_for_timeout(100)
    zoomed = int(canvas.get_attribute("data-t1")) - int(canvas.get_attribute("data-t0"))
    assert zoomed < span * 0.5
    t0 = int(canvas.get_attribute("data-t0"))
    page.keyboard.press("d")
    assert int(canvas.get_attribute("data-t0")) > t0
    page.keyboard.press("a")
    page.keyboard.press("a")
    assert int(canvas.get_attribute("data-t0")) < t0
    for _ in range(100):  # bounded wait for the server's answer to the last view
        if int(canvas.get_attribute("data-requests")) > requests and canvas.get_attribute("data-answers") != "1":
            break
        page.wait_for_timeout(50)
    assert int(canvas.get_attribute("data-requests")) > requests
    assert int(canvas.get_attribute("data-drawn")) > 0
    # Whole run again, then click the Steps track to see a step's details.
    # Mouse: Ctrl+wheel zooms in at the pointer, dragging pans.
    box = canvas.bounding_box()
    span_before = int(canvas.get_attribute("data-t1")) - int(canvas.get_attribute("data-t0"))
    page.mouse.move(box["x"] + 700, box["y"] + 40)
    page.keyboard.down("Control")
    page.mouse.wheel(0, -300)
    page.keyboard.up("Control")
    page.wait_for_timeout(100)
    assert int(canvas.get_attribute("data-t1")) - int(canvas.get_attribute("data-t0")) < span_before
    t0 = int(canvas.get_attribute("data-t0"))
    page.mouse.down()
    page.mouse.move(box["x"] + 500, box["y"] + 40, steps=5)
    page.mouse.up()
    assert int(canvas.get_attribute("data-t0")) > t0  # dragged left: later times come into view
    page.keyboard.press("0")
    # Bounded wait for the answer of the whole run (not a late one of an earlier view).
    page.wait_for_selector(f"#tl-canvas[data-answer-t0='0'][data-answer-t1='{span}']")
    layout = page.evaluate("Timeline.state.layout.map(t => ({name: t.name, y: t.y}))")
    steps = next(t for t in layout if t["name"] == "Steps")
    page.screenshot(path=str(shots / "timeline_whole_run.png"))
    page.mouse.click(box["x"] + 230 + (box["width"] - 230) * 0.5, box["y"] + steps["y"] + 8)
    page.wait_for_selector("#tl-event-table")
    assert page.inner_text("#tl-details h2").startswith("Step ")
    assert "steps row" in page.inner_text("#tl-details")


def test_timeline_search_jumps_to_a_kernel(page, base_url, run_id, shots):
    page.goto(run_url(base_url, run_id, "timeline"))
    page.wait_for_selector("#tl-canvas[data-answers]")
    page.fill("#tl-search", "implicit_gemm")
    page.press("#tl-search", "Enter")
    page.wait_for_selector("#tl-event-table")
    assert page.inner_text("#tl-search-info").startswith(f"1 of {STEPS * 2}")
    assert page.inner_text("#tl-details h2") == "implicit_gemm_conv"
    assert "device_ops row" in page.inner_text("#tl-details")
    assert "aten::conv2d" in page.inner_text("#tl-details")  # launched by
    page.wait_for_timeout(300)
    assert canvas_ink(page, "#tl-canvas") > 1_000
    page.screenshot(path=str(shots / "timeline_search.png"))


def test_memory_step_trace_host_counters_and_cluster_of_one_rank(page, base_url, run_id):
    page.goto(run_url(base_url, run_id, "memory"))
    page.wait_for_selector("#page-memory svg.lines polyline")
    assert f"{STEPS * OPS_PER_STEP}" in page.inner_text("#page-memory section:first-of-type tbody")
    page.goto(run_url(base_url, run_id, "step_trace"))
    page.wait_for_selector("#page-step_trace svg.stacked")
    assert len(page.query_selector_all("#page-step_trace section:last-of-type tbody tr")) == STEPS
    page.goto(run_url(base_url, run_id, "host"))
    page.wait_for_selector("#page-host svg.lines polyline")
    titles = [t.inner_text() for t in page.query_selector_all("#page-host h2")]
    assert titles[:4] == ["CPU", "Memory", "Disk", "Network"] and "cpu_util" in titles
    assert len(page.query_selector_all("#page-host section:has(h2:text-is('Samples')) tbody tr")) == STEPS
    page.goto(run_url(base_url, run_id, "cluster"))
    page.wait_for_selector("#cluster-none")
    assert "Not a multi-rank job" in page.inner_text("#cluster-none")


def test_overview_shows_advisor_findings(page, base_url, run_id):
    report = api(base_url, f"/api/advisor?run={urllib.parse.quote(run_id)}")
    page.goto(run_url(base_url, run_id, "overview"))
    page.wait_for_selector("#page-overview")
    if report["findings"]:
        titles = [li.query_selector("b").inner_text() for li in page.query_selector_all("#advisor-findings > li")]
        assert titles == [f["title"] for f in report["findings"]]
    else:
        assert "No findings" in page.inner_text("#advisor-none")


def test_compare_page_shows_the_slower_run(page, base_url, run_id, slow_run_id, shots):
    page.goto(run_url(base_url, slow_run_id, "compare"))
    page.wait_for_selector("#compare-base")
    page.select_option("#compare-base", run_id)
    page.wait_for_selector("#compare-summary")
    c = api(base_url, f"/api/compare?run={urllib.parse.quote(slow_run_id)}&base={urllib.parse.quote(run_id)}")
    assert page.inner_text("#compare-summary .big-number") == f"+{c['step_time']['delta_pct']:.1f} %"
    assert "delta-slower" in page.get_attribute("#compare-summary .big-number", "class")
    assert c["verdict"]["sentence"] in page.inner_text("#compare-verdict")
    assert len(page.query_selector_all("#page-compare svg.grouped rect")) == 2 * STEPS
    page.screenshot(path=str(shots / "compare.png"), full_page=True)


def test_cluster_page_shows_ranks_and_the_slow_one(page, tmp_path, shots):
    (tmp_path / "job").mkdir()
    for rank, extra_us in ((0, 0), (1, 400)):
        trace = tmp_path / "job" / f"rank{rank}.pt.trace.json"
        trace.write_text(json.dumps(make_trace(rank=rank, kernel_extra_us=extra_us)))
        parse_path(trace)
    with serve(tmp_path) as url:
        page.goto(run_url(url, "job/rank0_mlprof_output", "cluster"))
        page.wait_for_selector("#slow-ranks")
        assert "rank 1: compute" in page.inner_text("#slow-ranks")
        assert len(page.query_selector_all("#page-cluster svg.stacked rect")) >= 2
        page.screenshot(path=str(shots / "cluster.png"), full_page=True)
