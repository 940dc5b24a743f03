"""The dashboard's interactions in a real headless Chromium (Debian's, driven by Playwright), on the
synthetic GPU-like runs of conftest.py: run list, tables, drill-downs to the exact slice on the timeline,
timeline keys and details, the header's step picker, compare, cluster. The checks read real content:
table rows against the API's data, canvas pixels that are not background, chart options.
"""

from __future__ import annotations

import json

import pytest

from mlprof.parse import parse_path
from mlprof.collect.memory_page import TORCH_CATEGORIES, memory_timeline_html

from .browser import api, browser, canvas_ink, check_charts, page, q, run_url, serve, shot, wait_page  # noqa: F401
from .conftest import OPS_PER_STEP, STEPS, make_trace


@pytest.fixture(scope="module")
def base_url(logdir):
    with serve(logdir) as url:
        yield url


def test_run_list_loads_keeps_filter_and_sort_across_refreshes_and_a_run_opens(page, base_url):
    page.goto(base_url + "/")
    link = page.wait_for_selector("a.run-link")
    assert link.inner_text() == "jobs/train"
    assert "later.pt.trace.json" in page.inner_text("#unparsed")
    headers = page.eval_on_selector_all("#runs th", "els => els.map(e => e.innerText)")
    assert {"job", "rank", "device", "steps", "mean step (µs)"} <= set(headers), headers
    assert "GPU (Fake GPU)" in page.inner_text("#runs tbody")
    page.fill("#runs input[type=search]", "slow")
    page.click("#runs th[data-key=event_count]")
    shot(page, "runs")
    page.evaluate("RunList.refreshNow()")
    page.wait_for_timeout(300)
    assert page.input_value("#runs input[type=search]") == "slow"
    assert [r.inner_text() for r in page.query_selector_all("#runs tbody a.run-link")] == ["jobs/train_slow"]
    assert "sorted-desc" in page.get_attribute("#runs th[data-key=event_count]", "class")
    assert "null" not in page.inner_text("main")
    page.fill("#runs input[type=search]", "")
    page.click("a.run-link:text-is('jobs/train')")
    wait_page(page, "overview")
    assert page.inner_text("#page-overview h1").startswith("Overview")
    assert page.inner_text("#tile-step .tile-value").endswith("µs")
    check_charts(page, "#page-overview")
    assert page.query_selector("#advisor-findings, #advisor-none") is not None
    # The header switches runs and keeps the page.
    page.select_option("#run-switch", "jobs/train_slow_mlprof_output")
    page.wait_for_function("() => location.hash.includes('train_slow')")
    wait_page(page, "overview")


def test_op_table_sorts_filters_and_drills_down_to_the_clicked_call(page, base_url, run_id):
    rows = api(base_url, f"/api/data/op_statistic?run={q(run_id)}")
    page.goto(run_url(base_url, run_id, "operators", "?metric=host_self_ns"))
    wait_page(page, "operators")
    charts = check_charts(page, "#page-operators")
    assert [c["kind"] for c in charts] == ["pie", "hbars"]
    # Pie and bars give an op the same colour.
    colors = page.evaluate("""[...document.querySelectorAll('#page-operators .chart')].map(el => {
        const o = echarts.getInstanceByDom(el).getOption().series[0];
        return o.type === 'pie' ? o.data[0].itemStyle.color : o.data[0].itemStyle.color; })""")
    assert colors[0] == colors[1]
    table = "#page-operators section.card:has(h2:text-matches('All operators')) "
    first = lambda: page.inner_text(table + "tbody tr:first-child td:first-child")  # noqa: E731
    assert first() == max(rows, key=lambda r: r["host_self_ns"])["name"]
    page.click(table + "th[data-key=name]")
    assert first() == min((r["name"] for r in rows), key=str.lower)
    page.fill(table + "input[type=search]", "conv2d")
    shown = page.query_selector_all(table + "tbody tr")
    assert [r.query_selector("td").inner_text() for r in shown] == ["aten::conv2d"]
    shown[0].click()
    page.wait_for_selector("#op-drill tbody tr")
    assert len(page.query_selector_all("#op-drill section:first-child tbody tr")) == 2  # two input shapes
    page.click("#op-drill section:first-child tbody tr:first-child")
    page.wait_for_selector("#op-calls tbody tr")
    calls = page.query_selector_all("#op-calls tbody tr")
    assert len(calls) == STEPS
    # The third call's timeline link opens that call, not the first of its name.
    op_id = int(calls[2].query_selector("td").inner_text())
    calls[2].query_selector("a.tl-link").click()
    page.wait_for_selector("#tl-event-table")
    assert page.inner_text("#tl-details h2") == "aten::conv2d"
    assert page.evaluate("Timeline.state.selected.id") == op_id
    assert f'"op_id": {op_id}' in page.text_content("#tl-details pre")
    # Back: the table as it was left (its sort and filter are in the URL) with the op drilled into ...
    page.go_back()
    wait_page(page, "operators")
    assert "ops_filter=conv2d" in page.url and "ops_sort=name" in page.url and "op=aten%3A%3Aconv2d" in page.url
    assert page.input_value(table + "input[type=search]") == "conv2d"
    assert [r.inner_text() for r in page.query_selector_all(table + "tbody tr td:first-child")] == ["aten::conv2d"]
    page.wait_for_selector("#op-drill tbody tr")
    assert page.inner_text(table + "tbody tr.selected td:first-child") == "aten::conv2d"
    # ... and Back once more leaves the drill-down, not the table's filter.
    page.go_back()
    page.wait_for_function("() => !document.querySelector('#op-drill tbody tr')")  # the page drawn again
    wait_page(page, "operators")
    assert "op=" not in page.url.replace("ops_", "") and page.input_value(table + "input[type=search]") == "conv2d"


def test_cpu_run_greys_out_pages_it_has_no_data_for(page, tmp_path):
    trace = make_trace()
    trace["traceEvents"] = [e for e in trace["traceEvents"] if e.get("cat") not in ("kernel", "cuda_runtime")
                            and e.get("name") != "[memory]" and e.get("ph") != "C"]
    (tmp_path / "cpu.pt.trace.json").write_text(json.dumps(trace))
    parse_path(tmp_path / "cpu.pt.trace.json")
    with serve(tmp_path) as url:
        page.goto(run_url(url, "cpu_mlprof_output", "operators"))
        wait_page(page, "operators")
        heads = page.eval_on_selector_all("#page-operators th", "els => els.map(e => e.innerText)")
        assert not any("device" in x for x in heads)  # no all-zero device columns on a CPU run
        for key in ("kernels", "memory", "host", "cluster", "modules", "callsites"):
            assert "na" in page.get_attribute(f"nav a[data-page={key}]", "class").split()
        page.goto(run_url(url, "cpu_mlprof_output", "kernels"))
        page.wait_for_selector("#page-na")
        assert "CPU-only" in page.inner_text("#page-na")


def test_download_links_return_the_shown_data(page, base_url, run_id):
    page.goto(run_url(base_url, run_id, "kernels"))
    wait_page(page, "kernels")
    links = page.query_selector_all("#page-kernels a[data-format=csv]")
    assert links
    for link in links:
        r = page.request.get(base_url + link.get_attribute("href"))
        assert r.ok and r.headers["content-type"].startswith("text/csv")
        assert len(r.text().splitlines()) > 1
    body = page.request.get(base_url + page.get_attribute("#page-kernels a[data-format=json]", "href")).json()
    shown = page.query_selector_all("#page-kernels section:nth-of-type(2) tbody tr")
    assert len(shown) == len(body)


def test_timeline_draws_zooms_pans_and_shows_details_with_links(page, base_url, run_id):
    page.goto(run_url(base_url, run_id, "timeline"))
    page.wait_for_selector("#tl-canvas[data-answers]")
    canvas = page.query_selector("#tl-canvas")
    assert int(canvas.get_attribute("data-drawn")) > 0
    assert canvas_ink(page, "#tl-canvas") > 5_000
    shot(page, "synthetic_timeline")
    meta = api(base_url, f"/api/timeline/meta?run={q(run_id)}")
    span = int(canvas.get_attribute("data-t1")) - int(canvas.get_attribute("data-t0"))
    requests = int(canvas.get_attribute("data-requests"))
    page.click("#tl-canvas", position={"x": 5, "y": 5})  # focus (label column: no selection)
    for _ in range(6):
        page.keyboard.press("w")
    zoomed = int(canvas.get_attribute("data-t1")) - int(canvas.get_attribute("data-t0"))
    assert zoomed < span * 0.5
    t0 = int(canvas.get_attribute("data-t0"))
    page.keyboard.press("d")
    assert int(canvas.get_attribute("data-t0")) > t0
    page.keyboard.press("a")
    page.keyboard.press("a")
    assert int(canvas.get_attribute("data-t0")) < t0
    page.wait_for_function("n => +document.querySelector('#tl-canvas').dataset.requests > n", arg=requests)
    box = canvas.bounding_box()
    span_before = int(canvas.get_attribute("data-t1")) - int(canvas.get_attribute("data-t0"))
    page.mouse.move(box["x"] + 700, box["y"] + 40)
    page.keyboard.down("Control")
    page.mouse.wheel(0, -300)
    page.keyboard.up("Control")
    page.wait_for_function("s => +document.querySelector('#tl-canvas').dataset.t1 - +document.querySelector('#tl-canvas').dataset.t0 < s",
                           arg=span_before)
    t0 = int(canvas.get_attribute("data-t0"))
    page.mouse.down()
    page.mouse.move(box["x"] + 500, box["y"] + 40, steps=5)
    page.mouse.up()
    assert int(canvas.get_attribute("data-t0")) > t0  # dragged left: later times come into view
    # 0: back to the captured steps.
    page.keyboard.press("0")
    w = meta["window"]
    page.wait_for_function("w => +document.querySelector('#tl-canvas').dataset.answerT0 <= w.start && "
                           "+document.querySelector('#tl-canvas').dataset.answerT1 >= w.end", arg=w)
    layout = page.evaluate("Timeline.state.layout.map(t => ({name: t.name, y: t.y}))")
    steps = next(t for t in layout if t["name"] == "Steps")
    box = canvas.bounding_box()
    page.mouse.click(box["x"] + 230 + (box["width"] - 230) * 0.5, box["y"] + steps["y"] + 8)
    page.wait_for_selector("#tl-event-table")
    assert page.inner_text("#tl-details h2").startswith("ProfilerStep#")
    assert "this step's breakdown" in page.inner_text("#tl-details")
    assert page.query_selector("#tl-details .raw-row")  # the stored row is there, folded


def test_timeline_search_jumps_to_a_kernel_and_its_launching_op_is_a_link(page, base_url, run_id):
    page.goto(run_url(base_url, run_id, "timeline"))
    page.wait_for_selector("#tl-canvas[data-answers]")
    page.fill("#tl-search", "implicit_gemm")
    page.press("#tl-search", "Enter")
    page.wait_for_selector("#tl-event-table")
    assert page.inner_text("#tl-search-info").startswith(f"1 of {STEPS * 2}")
    assert page.inner_text("#tl-details h2") == "implicit_gemm_conv"
    fields = page.inner_text("#tl-event-table")
    assert "GPU 0, stream" in fields and "device type" not in fields
    page.click("#tl-details a.tl-jump:text-is('aten::conv2d')")
    page.wait_for_function("() => document.querySelector('#tl-details h2').innerText === 'aten::conv2d'")
    page.wait_for_selector("#tl-event-table")
    assert "implicit_gemm_conv" in page.inner_text("#tl-details")  # and back: the kernel it launched
    assert canvas_ink(page, "#tl-canvas") > 1_000


def test_the_step_picker_makes_every_page_follow_one_step(page, base_url, run_id):
    page.goto(run_url(base_url, run_id, "operators"))
    wait_page(page, "operators")
    page.select_option("#step-switch", "1")
    page.wait_for_function("() => location.hash.includes('step=1')")
    wait_page(page, "operators")
    assert "step 1" in page.inner_text("#page-operators h1")
    conv = page.inner_text("#page-operators section.card:has(h2:text-matches('All operators')) tr:has(td:text-is('aten::conv2d'))")
    assert f"\t{OPS_PER_STEP // 3}\t" in conv  # calls in one step
    assert all("step=1" in a.get_attribute("href") for a in page.query_selector_all("nav a"))
    page.click("nav a[data-page=timeline]")
    page.wait_for_selector("#tl-canvas[data-answers]")
    meta = api(base_url, f"/api/timeline/meta?run={q(run_id)}")
    s1 = meta["steps"][1]
    t0, t1 = int(page.get_attribute("#tl-canvas", "data-t0")), int(page.get_attribute("#tl-canvas", "data-t1"))
    assert t0 <= s1["start"] < s1["end"] <= t1 and t1 - t0 < 1.1 * (s1["end"] - s1["start"])


def test_step_trace_bars_click_through_to_the_timeline(page, base_url, run_id):
    page.goto(run_url(base_url, run_id, "step_trace"))
    wait_page(page, "step_trace")
    check_charts(page, "#page-step_trace")
    # Click the middle of step 2's bar in the host view.
    x, y = page.evaluate("""(() => {
        const el = [...document.querySelectorAll('#page-step_trace .card')].find(c => c.innerText.startsWith('Host view')).querySelector('.chart');
        el.scrollIntoView({block: 'center'});
        const chart = echarts.getInstanceByDom(el), series = chart.getOption().series;
        const i = series.findIndex(s => s.data[2] > 0), r = el.getBoundingClientRect();
        const [px, py] = chart.convertToPixel({seriesIndex: i}, [2, series[i].data[2] / 2]);
        return [r.left + px, r.top + py]; })()""")
    page.mouse.click(x, y)
    page.wait_for_selector("#tl-canvas[data-answers]")
    assert "step=2" in page.url
    assert page.input_value("#tl-step") == "2"


def test_advisor_evidence_links_open_the_exact_slice(page, base_url, run_id):
    report = api(base_url, f"/api/advisor?run={q(run_id)}")
    page.goto(run_url(base_url, run_id, "advisor"))
    wait_page(page, "advisor")
    cards = page.query_selector_all("#advisor-all section.finding")
    assert [c.query_selector("h2").inner_text() for c in cards] == [f["title"] for f in report["findings"]]
    shot(page, "synthetic_advisor")
    link = page.query_selector("#advisor-all a.ev-op")
    if link is None:
        pytest.skip("no op evidence in this report")
    name = link.inner_text()
    link.click()
    page.wait_for_selector("#tl-event-table")
    assert page.inner_text("#tl-details h2") == name
    # Its other link, "in the operator table": the op's row is marked and scrolled into view.
    page.go_back()
    wait_page(page, "advisor")
    page.eval_on_selector("#advisor-all a.ev-op", "a => a.parentElement.querySelector('a:not(.ev-op)').click()")
    row = page.wait_for_selector("#page-operators table.data tr.selected")
    page.wait_for_selector("#op-drill tbody tr")  # the drill-down opened too, and left the row in view
    assert row.query_selector("td").inner_text() == name
    assert page.evaluate("r => { const b = r.getBoundingClientRect(); return b.top >= 0 && b.bottom <= innerHeight; }", row)


def test_compare_states_its_metric_and_draws_where_the_change_comes_from(page, base_url, run_id, slow_run_id):
    page.goto(run_url(base_url, slow_run_id, "compare"))
    page.wait_for_selector("#compare-base")
    page.select_option("#compare-base", run_id)
    page.wait_for_selector("#compare-summary")
    wait_page(page, "compare")
    c = api(base_url, f"/api/compare?run={q(slow_run_id)}&base={q(run_id)}")
    assert page.inner_text("#compare-summary .big-number") == f"+{c['step_time']['delta_pct']:.1f} %"
    assert "delta-slower" in page.get_attribute("#compare-summary .big-number", "class")
    assert c["verdict"]["sentence"] in page.inner_text("#compare-verdict")
    assert c["metric"]["label"] in page.inner_text("#compare-metric")
    kinds = [x["kind"] for x in check_charts(page, "#page-compare")]
    assert kinds.count("waterfall") == len(c["waterfalls"]) >= 2
    # One unit per table: every base/new/change header names the same unit.
    heads = page.eval_on_selector_all("#page-compare section:has(h2:text-is('Op types')) th", "els => els.map(e => e.innerText)")
    units = {h.split("(")[1].rstrip(")") for h in heads if h.startswith(("base (", "new (", "change ("))}
    assert len(units) == 1, heads
    # Ops present in both runs show both calls counts.
    relu = page.inner_text("#page-compare section:has(h2:text-is('Op types')) tr:has(td:text-is('aten::relu'))")
    assert "both" in relu
    shot(page, "synthetic_compare")


def test_cluster_page_shows_ranks_the_slow_one_and_links_them(page, tmp_path):
    (tmp_path / "job").mkdir()
    for rank, extra_us in ((0, 0), (1, 400)):
        trace = tmp_path / "job" / f"rank{rank}.pt.trace.json"
        trace.write_text(json.dumps(make_trace(rank=rank, kernel_extra_us=extra_us)))
        parse_path(trace)
    with serve(tmp_path) as url:
        page.goto(run_url(url, "job/rank0_mlprof_output", "cluster"))
        wait_page(page, "cluster")
        assert "rank 1: compute" in page.inner_text("#slow-ranks")
        assert "cause: device compute" in page.inner_text("#slow-ranks")  # the cause from its attribution
        check_charts(page, "#page-cluster")
        assert page.get_attribute("#slow-ranks a.rank-link", "href").endswith(q("job/rank1_mlprof_output") + "/overview")


def test_the_memory_timeline_page_renders_from_disk_offline(page, tmp_path):
    """export_memory_timeline("x.html"): one file, its chart library inlined."""
    sizes = [[0] + [i * 1024 * (k + 1) for k in range(len(TORCH_CATEGORIES))] for i in range(50)]
    (tmp_path / "m.html").write_text(memory_timeline_html(list(range(1000, 51000, 1000)), sizes, "cpu"))
    page.goto((tmp_path / "m.html").as_uri())
    page.wait_for_function("() => echarts.getInstanceByDom(document.getElementById('chart'))")
    n = page.evaluate("echarts.getInstanceByDom(document.getElementById('chart')).getOption().series.length")
    assert n == len(TORCH_CATEGORIES)


SERIES_COLOURS = """() => [...document.querySelectorAll('.chart')].flatMap(el => echarts.getInstanceByDom(el).getOption().series
    .flatMap(s => s.type === 'pie' ? s.data.map(d => [d.name, d.itemStyle.color]) : s.name ? [[s.name, s.itemStyle.color]] : []))"""


def test_one_colour_per_concept_on_every_page(page, base_url, run_id):
    """Data loading is one colour on the overview's categories, the step trace's host phases and its idle
    causes; so is communication; within a view, no two phases share one."""
    phases = api(base_url, f"/api/features?run={q(run_id)}")["phases"]
    overview = api(base_url, f"/api/overview?run={q(run_id)}")
    concept = {}  # (view, label) -> concept key
    for view, rows in phases.items():
        concept.update({(view, label): key for _, label, key in rows})
    concept.update({("category", c["label"]): c["key"] for c in overview["categories"]})
    seen = {}
    for name in ("overview", "step_trace"):
        page.goto(run_url(base_url, run_id, name))
        wait_page(page, name)
        for label, colour in page.evaluate(SERIES_COLOURS):
            for (view, known), key in concept.items():
                if known == label:
                    seen.setdefault((view, key), set()).add(colour)
    assert all(len(c) == 1 for c in seen.values()), seen
    colour = {k: next(iter(c)) for k, c in seen.items()}
    for view in ("host", "idle", "device", "category"):
        mine = [c for (v, _), c in colour.items() if v == view]
        assert len(set(mine)) == len(mine), (view, colour)
    loading = {c for (v, k), c in colour.items() if k == "data_loading"}
    comm = {c for (v, k), c in colour.items() if k in ("communication", "host_communication")}
    assert len(loading) == 1 and len(comm) <= 1, colour
    assert {v for (v, k) in colour if k == "data_loading"} >= {"host", "category"}


NEAR_HUE_PAIR = """() => {
  // Two op-like names whose own (hash) colours are within a few degrees of hue: they would read as one slice.
  const hue = n => +/^hsl\\((\\d+)/.exec(U.colorOf(n))[1];
  const names = Array.from({ length: 400 }, (_, i) => `aten::op_${i}`);
  for (const a of names) for (const b of names)
    if (a < b && Math.min(Math.abs(hue(a) - hue(b)), 360 - Math.abs(hue(a) - hue(b))) < 6)
      return { a, b, own: [U.colorOf(a), U.colorOf(b)], distinct: U.distinctColors([a, b, "forward"]) };
  return null;
}"""

OPS_CHART_COLOURS = """() => [...document.querySelectorAll('#page-operators .chart')].map(el => {
  const s = echarts.getInstanceByDom(el).getOption().series[0];
  return { type: s.type, colours: s.data.map(d => d.itemStyle.color),
           names: s.type === 'pie' ? s.data.map(d => d.name) : null };
})"""


def test_slices_of_one_chart_never_share_a_hue_and_an_op_keeps_its_colour_across_charts(page, base_url, run_id):
    page.goto(run_url(base_url, run_id, "operators"))
    wait_page(page, "operators")
    pair = page.evaluate(NEAR_HUE_PAIR)
    assert pair is not None
    first, second, concept = pair["distinct"]
    assert first == pair["own"][0]  # the larger keeps its own colour
    assert second != pair["own"][1] and second.split(",")[0] == pair["own"][1].split(",")[0]  # same hue, other lightness
    assert concept == page.evaluate("U.conceptColor('forward')")  # concepts keep theirs
    pie, bars = page.evaluate(OPS_CHART_COLOURS)
    assert pie["type"] == "pie" and bars["type"] == "bar"
    ops = [c for n, c in zip(pie["names"], pie["colours"]) if not n.startswith("other ops")]
    assert ops == bars["colours"][:len(ops)]  # the same op, the same colour on the pie and the bars
    assert len(set(ops)) == len(ops)


TRACKS = "Timeline.state.layout.map(t => ({id: t.id, name: t.name, y: t.y, height: t.height, depth: t.max_depth}))"


def test_a_python_track_opens_folded_and_its_name_folds_and_unfolds_it(page, base_url, run_id):
    page.goto(run_url(base_url, run_id, "timeline"))
    page.wait_for_selector("#tl-canvas[data-answers]")
    tracks = page.evaluate(TRACKS)
    python = next(t for t in tracks if t["name"].endswith(" python"))
    after = next(t for t in tracks if t["y"] > python["y"])
    assert python["depth"] >= 1 and python["height"] == 16  # one row, however deep the stack
    box = page.query_selector("#tl-canvas").bounding_box()
    page.mouse.click(box["x"] + 40, box["y"] + python["y"] + 8)  # its name, in the label column
    unfolded = {t["name"]: t for t in page.evaluate(TRACKS)}
    assert unfolded[python["name"]]["height"] == 16 * (python["depth"] + 1)
    assert unfolded[after["name"]]["y"] == after["y"] + 16 * python["depth"]  # the tracks below make room
    assert page.evaluate("Timeline.state.selected") is None  # a click on a name selects nothing
    page.mouse.click(box["x"] + 40, box["y"] + python["y"] + 8)
    assert {t["name"]: t for t in page.evaluate(TRACKS)}[python["name"]]["height"] == 16
    # A slice found under the folded row unfolds its track.
    page.fill("#tl-search", "_call_impl")
    page.press("#tl-search", "Enter")
    page.wait_for_function("() => Timeline.state.selected && Timeline.state.selected.name.includes('_call_impl')")
    assert {t["name"]: t for t in page.evaluate(TRACKS)}[python["name"]]["height"] == 16 * (python["depth"] + 1)


def test_timeline_legend_names_what_fills_the_view_and_shift_drag_gives_a_range_s_statistics(page, base_url, run_id):
    page.goto(run_url(base_url, run_id, "timeline"))
    page.wait_for_selector("#tl-canvas[data-answers]")
    page.wait_for_selector("#tl-legend .tl-legend-item")
    items = page.query_selector_all("#tl-legend .tl-legend-item")
    names = [i.get_attribute("data-name") for i in items]
    assert 3 <= len(names) <= 10 and len(set(names)) == len(names)
    assert "aten::conv2d" in names or "implicit_gemm_conv" in names
    # Each swatch is drawn in the colour the canvas gives that name.
    colours = page.evaluate("[...document.querySelectorAll('#tl-legend .swatch')].map(s => s.style.background)")
    expected = page.evaluate("names => names.map(n => { const d = document.createElement('div'); "
                             "d.style.background = U.colorOf(n); return d.style.background; })", names)
    assert colours == expected
    # A click on a legend entry opens that name's longest slice.
    items[0].click()
    page.wait_for_function("n => Timeline.state.selected && Timeline.state.selected.name === n", arg=names[0])
    # Shift+drag over the middle of the captured steps: the details list what lies in the range, exactly.
    page.keyboard.press("0")
    canvas = page.query_selector("#tl-canvas")
    page.wait_for_function("() => +document.querySelector('#tl-canvas').dataset.answers > 0")
    box = canvas.bounding_box()
    x0, x1 = box["x"] + 230 + (box["width"] - 230) * 0.3, box["x"] + 230 + (box["width"] - 230) * 0.6
    t_before = canvas.get_attribute("data-t0")
    page.keyboard.down("Shift")
    page.mouse.move(x0, box["y"] + 30)
    page.mouse.down()
    page.mouse.move(x1, box["y"] + 30, steps=5)
    page.mouse.up()
    page.keyboard.up("Shift")
    page.wait_for_selector("#tl-details[data-range] #tl-range-kinds")
    assert canvas.get_attribute("data-t0") == t_before  # a range selection does not pan
    t0, t1 = (int(x) for x in page.get_attribute("#tl-details", "data-range").split("-"))
    answer = api(base_url, f"/api/timeline/range?run={q(run_id)}&t0={t0}&t1={t1}")
    rows = page.query_selector_all("#tl-details table.data tbody tr")
    assert len(rows) == len(answer["rows"]) > 0
    assert page.inner_text("#tl-details h2").startswith("Range ")
    assert "device op" in page.inner_text("#tl-range-kinds")
    shot(page, "timeline_range")
    # A name in the range's table opens its longest slice.
    first = page.inner_text("#tl-details table.data tbody tr a")
    page.click("#tl-details table.data tbody tr a")
    page.wait_for_function("n => Timeline.state.selected && Timeline.state.selected.name === n", arg=first)
