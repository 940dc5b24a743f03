"""Browser fixtures of the dashboard tests: a server over a logdir, Debian's headless Chromium via Playwright,
a page that fails its test on any console error, and where screenshots go.

Skips when /usr/bin/chromium or Playwright is missing (scripts/install_browser.sh installs the browser).
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

from mlprof.ui.server import create_app  # noqa: E402

ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        "--disable-dev-shm-usage"]
TIMEOUT_MS = 30_000
# Screenshots of every page, for a reviewer: MLPROF_UI_SCREENSHOTS=DIR, else tests/ui/artifacts/screenshots.
SHOTS = Path(os.environ.get("MLPROF_UI_SCREENSHOTS") or Path(__file__).parent / "artifacts" / "screenshots")


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
def browser():
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1440, "height": 900})
    pg = context.new_page()
    pg.set_default_timeout(TIMEOUT_MS)
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    pg.errors = errors
    yield pg
    context.close()
    assert errors == [], errors  # no script error, no CSP violation, no failed load


def shot(pg, name: str) -> Path:
    """A full-page screenshot kept for a reviewer; its path is printed (pytest -s shows it)."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    path = SHOTS / f"{name}.png"
    pg.screenshot(path=str(path), full_page=True)
    print(f"screenshot: {path}")
    return path


def api(base_url, path):
    with urllib.request.urlopen(base_url + path, timeout=30) as r:
        return json.loads(r.read())


def q(value: str) -> str:
    return urllib.parse.quote(value, safe="")


def run_url(base_url, run_id, page_name, query=""):
    return f"{base_url}/#/run/{q(run_id)}/{page_name}{query}"


def canvas_ink(pg, selector) -> int:
    """Pixels of the (first) canvas under ``selector`` that are not the white background."""
    return pg.evaluate("""sel => {
        const el = document.querySelector(sel), c = el.tagName === 'CANVAS' ? el : el.querySelector('canvas');
        const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
        let n = 0;
        for (let i = 0; i < d.length; i += 4) if (d[i + 3] > 0 && (d[i] < 235 || d[i + 1] < 235 || d[i + 2] < 235)) n++;
        return n; }""", selector)


def wait_page(pg, key: str) -> None:
    """The page is in place and every chart on it has drawn."""
    pg.wait_for_selector(f"#page-{key}")
    pg.wait_for_function("""key => [...document.querySelectorAll(`#page-${key} .chart`)].every(c => c.dataset.rendered)""",
                         arg=key)


CHART_CHECK = """root => [...document.querySelectorAll(root + ' .chart')].map(el => {
    const chart = echarts.getInstanceByDom(el), o = chart.getOption(), card = el.closest('.card, .grow') || el.parentElement;
    const c = el.querySelector('canvas'), d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
    let ink = 0;
    for (let i = 0; i < d.length; i += 16) if (d[i + 3] > 0 && (d[i] < 235 || d[i + 1] < 235 || d[i + 2] < 235)) ink++;
    const sizes = [...(o.xAxis || []), ...(o.yAxis || [])].map(a => (a.axisLabel || {}).fontSize)
      .concat((o.legend || []).map(l => (l.textStyle || {}).fontSize)).filter(x => x !== undefined);
    const names = [...(o.xAxis || []), ...(o.yAxis || [])].filter(a => a.type === 'value').map(a => a.name || '');
    const pad = parseFloat(getComputedStyle(card).paddingLeft) + parseFloat(getComputedStyle(card).paddingRight);
    return {kind: el.dataset.kind, ink, sizes, names, width: el.clientWidth, room: card.clientWidth - pad,
            tooltip: !!(o.tooltip && o.tooltip.length)};
})"""


def check_charts(pg, root: str) -> list[dict]:
    """Every chart under ``root``: drawn (ink), labels >= 12 px, value axes titled, a tooltip, as wide as its card."""
    charts = pg.evaluate(CHART_CHECK, root)
    for c in charts:
        assert c["ink"] > 50, c
        assert all(size >= 12 for size in c["sizes"]), c
        assert all(name.strip() for name in c["names"]), c  # value axes have a title (with their unit)
        assert c["tooltip"], c
        assert abs(c["width"] - c["room"]) <= 2, c  # not capped narrower than the card
    return charts
