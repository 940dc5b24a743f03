"""Every page on a real CPU capture, a real GPU trace and a real 2-rank gloo job, in headless Chromium.

Each page must render with drawn charts (ink on the canvas), readable labels (12 px), titled value
axes, hover tooltips and charts as wide as their card, and no console error; a page a run has
nothing for says so and is greyed in the menu. A screenshot of each is kept (browser.SHOTS).
"""

from __future__ import annotations

import pytest

from .browser import api, browser, check_charts, page, q, run_url, serve, shot, wait_page  # noqa: F401

pytest.importorskip("torch", reason="the CPU and gloo runs are profiled for real")

PAGES = ["overview", "advisor", "operators", "kernels", "timeline", "step_trace", "modules", "callsites",
         "data_loading", "memory", "host", "compare", "cluster"]
# What each kind of run has no data for (the menu greys these out).
EMPTY = {"cpu": {"kernels", "cluster"}, "gpu": {"modules", "callsites", "memory", "host", "cluster"},
         "ddp0": {"kernels", "memory"}}


@pytest.fixture(scope="module")
def real(tmp_path_factory):
    from .real_runs import make_real_logdir

    root = tmp_path_factory.mktemp("real_logdir")
    ids = make_real_logdir(root)
    with serve(root) as url:
        yield url, ids


@pytest.mark.parametrize("kind", ["cpu", "gpu", "ddp0"])
def test_every_page_renders_with_readable_charts(page, real, kind):
    url, ids = real
    if kind not in ids:
        pytest.skip("shared GPU trace not available")
    run = ids[kind]
    other = ids["ddp1"] if kind != "ddp0" else ids["cpu"]
    for name in PAGES:
        query = f"?base={q(other)}" if name == "compare" else ""
        page.goto(run_url(url, run, name, query))
        wait_page(page, name)
        nav = page.get_attribute(f"nav a[data-page={name}]", "class") or ""
        if name in EMPTY[kind]:
            assert "na" in nav.split(), name
            assert page.query_selector("#page-na, #no-kernels, #no-memory, #cluster-none"), name
        else:
            assert "na" not in nav.split(), name
            assert not page.query_selector("#page-na"), name
            if name == "timeline":
                page.wait_for_selector("#tl-canvas[data-answers]")
                assert int(page.get_attribute("#tl-canvas", "data-drawn")) > 0
            else:
                assert page.query_selector_all(f"#page-{name} .chart"), name
                check_charts(page, f"#page-{name}")
        text = page.inner_text("main")
        assert "null" not in text.split() and "undefined" not in text and "NaN" not in text, name
        assert "device type" not in text and "device -1" not in text, name
        shot(page, f"{kind}_{name}")


def test_cpu_timeline_opens_on_the_captured_steps_not_the_whole_sampled_job(page, real):
    url, ids = real
    meta = api(url, f"/api/timeline/meta?run={q(ids['cpu'])}")
    assert meta["window"]["end"] - meta["window"]["start"] < 0.8 * meta["span_ns"]  # the sampler ran far longer
    page.goto(run_url(url, ids["cpu"], "timeline"))
    page.wait_for_selector("#tl-canvas[data-answers]")
    t0, t1 = int(page.get_attribute("#tl-canvas", "data-t0")), int(page.get_attribute("#tl-canvas", "data-t1"))
    w = meta["window"]
    assert t0 <= w["start"] and t1 >= w["end"] and (t1 - t0) < 1.1 * (w["end"] - w["start"])
    page.click("#tl-whole")
    page.wait_for_function("span => +document.querySelector('#tl-canvas').dataset.t1 >= span", arg=meta["span_ns"])


def test_host_page_marks_the_captured_steps(page, real):
    url, ids = real
    page.goto(run_url(url, ids["cpu"], "host"))
    wait_page(page, "host")
    bands = page.evaluate("""[...document.querySelectorAll('#page-host .chart')].map(el =>
        (echarts.getInstanceByDom(el).getOption().series[0].markArea || {}).data || []).filter(d => d.length).length""")
    assert bands >= 2
    # Percent counters are in %, not bytes.
    cpu = page.evaluate("""(() => { const el = [...document.querySelectorAll('#page-host .card')].find(c => c.querySelector('h2').innerText === 'CPU');
        return echarts.getInstanceByDom(el.querySelector('.chart')).getOption().yAxis[0].name; })()""")
    assert cpu == "CPU (%)"


def test_cluster_of_gloo_ranks_links_ranks_and_draws_the_matrix(page, real):
    url, ids = real
    page.goto(run_url(url, ids["ddp0"], "cluster"))
    wait_page(page, "cluster")
    assert page.query_selector("#cluster-matrix .chart")  # gloo: host-side collectives
    assert "host-side collectives" in page.inner_text("#page-cluster")
    page.click("#cluster-ranks a[data-rank='1']")
    page.wait_for_selector("#page-overview")
    assert q(ids["ddp1"]) in page.url
    # The header's rank switcher goes back to rank 0, on the same page.
    page.click("#rank-switch a[data-rank='0']")
    page.wait_for_selector("#page-overview")
    assert q(ids["ddp0"]) in page.url


def test_modules_and_call_sites_of_a_real_capture(page, real):
    url, ids = real
    page.goto(run_url(url, ids["cpu"], "modules"))
    wait_page(page, "modules")
    charts = check_charts(page, "#page-modules")
    assert [c["kind"] for c in charts] == ["treemap"]
    assert "SmallCNN" in page.inner_text("#page-modules table")
    page.goto(run_url(url, ids["cpu"], "callsites", "?phase=forward"))
    wait_page(page, "callsites")
    assert "cnn_train.py" in page.inner_text("#page-callsites table")
    assert set(page.eval_on_selector_all("#page-callsites tbody tr td:first-child", "els => els.map(e => e.innerText)")) == {"forward"}


def test_memory_range_selection_filters_the_allocation_tables(page, real):
    url, ids = real
    page.goto(run_url(url, ids["cpu"], "memory"))
    wait_page(page, "memory")
    page.wait_for_selector("#memory-range-info")
    before = page.inner_text("#memory-range-info")
    assert before.startswith("Showing every allocation on CPU")
    page.evaluate("""echarts.getInstanceByDom(document.querySelector('#page-memory .chart'))
        .dispatchAction({type: 'dataZoom', start: 10, end: 40})""")
    page.wait_for_function("() => document.querySelector('#memory-range-info').innerText.includes('between')")
    total = lambda text: int(text.split("(")[-1].split()[0].replace(",", ""))  # noqa: E731
    assert 0 < total(page.inner_text("#memory-range-info")) < total(before)


def test_an_operator_says_where_it_was_called_from(page, real):
    """The CPU capture has no Kineto Python frames (no with_stack) but mlprof run's stack samples: the
    operator drill-down names the line of cnn_train.py that called the op, from the samples taken while it
    ran (the op with the most time, so that samples fall in it)."""
    url, ids = real
    ops = api(url, f"/api/data/op_statistic?run={q(ids['cpu'])}")
    top = max((o for o in ops if o["name"].startswith("aten::")), key=lambda o: o["host_total_ns"])["name"]
    page.goto(run_url(url, ids["cpu"], "operators", f"?op={q(top)}"))
    wait_page(page, "operators")
    page.wait_for_selector("#op-call-sites tbody tr")
    heading = page.inner_text("#op-drill section:has(#op-call-sites) h2")
    assert "called from (stack samples taken while it ran)" in heading, heading
    lines = page.eval_on_selector_all("#op-call-sites tbody tr td:first-child", "els => els.map(e => e.innerText)")
    assert any("cnn_train.py:" in line for line in lines), (top, lines)
