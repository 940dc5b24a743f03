"use strict";
// Charts on Apache ECharts (vendored: echarts.min.js, see docs/ui.md): every chart gets axis titles with
// its unit, ticks in that unit, hover values, 12 px labels, and the width of its card (resized with it).
// Values arrive raw (ns, bytes, %) and are scaled to one unit per axis, chosen from the data.
const Charts = (() => {
  const { h, scaleFor, fmtUnit, sig, shorten } = U;
  const FONT = 12, live = new Set();
  const TEXT = { fontSize: FONT, color: "#1d2330" };
  const AXIS_LABEL = { fontSize: FONT, color: "#445" };
  const AXIS_NAME = { fontSize: FONT, color: "#667085" };
  // Tooltips drawn on the canvas: ECharts' HTML tooltips carry style attributes, which the page's CSP
  // (style-src 'self') blocks. Names in them are canvas text, never markup.
  const TOOLTIP = { renderMode: "richText", confine: true, textStyle: { fontSize: FONT }, backgroundColor: "#fff",
    borderColor: "#c4c9d4", padding: [6, 8] };

  // A chart element; ECharts starts once the element has a width (it is in the page) and follows its size.
  function mount(option, opts = {}) {
    const el = h("div", { class: "chart", dataset: { kind: opts.kind || "chart" } });
    el.style.height = `${opts.height || 300}px`;
    const entry = { el, chart: null, ro: null };
    entry.ro = new ResizeObserver(() => {
      if (!el.isConnected || !el.clientWidth) return;
      if (entry.chart) { entry.chart.resize(); return; }
      entry.chart = echarts.init(el, null, { renderer: "canvas" });
      entry.chart.on("finished", () => { el.dataset.rendered = "1"; });
      entry.chart.setOption({ textStyle: TEXT, animation: false, ...option });
      for (const [event, fn] of Object.entries(opts.on || {})) entry.chart.on(event, fn);
      if (opts.ready) opts.ready(entry.chart);
    });
    entry.ro.observe(el);
    live.add(entry);
    return el;
  }
  function disposeAll() {
    for (const e of live) { e.ro.disconnect(); if (e.chart) e.chart.dispose(); }
    live.clear();
  }
  function valueAxis(name, unit, extra = {}) {
    return { type: "value", name: unit ? `${name} (${unit})` : name, nameLocation: "middle", nameGap: 48,
      nameTextStyle: AXIS_NAME, axisLabel: { ...AXIS_LABEL, formatter: v => sig(v) }, splitLine: { lineStyle: { color: "#eef0f3" } }, ...extra };
  }
  function categoryAxis(names, name, extra = {}) {
    return { type: "category", data: names, name, nameLocation: "middle", nameGap: 28, nameTextStyle: AXIS_NAME,
      axisLabel: { ...AXIS_LABEL, hideOverlap: true }, ...extra };
  }
  const legend = (extra = {}) => ({ type: "scroll", top: 0, textStyle: { fontSize: FONT }, ...extra });

  // Vertical bars, stacked or side by side. rows: [{label, ...values}]; series: [{key, name, color}].
  function bars(rows, series, opts = {}) {
    const kind = opts.kind || "ns", stack = opts.stack !== false;
    const totals = rows.map(r => stack ? series.reduce((a, s) => a + Math.max(0, r[s.key] || 0), 0)
      : Math.max(0, ...series.map(s => r[s.key] || 0)));
    const { div, unit } = scaleFor(Math.max(0, ...totals), kind);
    const shown = series.filter(s => rows.some(r => r[s.key]));
    return mount({
      legend: legend(), grid: { left: 64, right: 16, top: 36, bottom: 48 },
      tooltip: { ...TOOLTIP, trigger: "axis", axisPointer: { type: "shadow" },
        valueFormatter: v => fmtUnit(v * div, kind) },
      xAxis: categoryAxis(rows.map(r => r.label), opts.xName || ""),
      yAxis: valueAxis(opts.yName || "time", unit),
      series: shown.map(s => ({ name: s.name, type: "bar", stack: stack ? "all" : undefined, barMaxWidth: 48,
        itemStyle: { color: s.color }, emphasis: { focus: "series" },
        data: rows.map(r => r[s.key] === null || r[s.key] === undefined ? null : r[s.key] / div) })),
    }, { kind: "bars", height: opts.height, on: opts.onClick ? { click: p => opts.onClick(rows[p.dataIndex], p) } : {} });
  }

  // One value per step as a line (a training scalar: loss, samples/s), steps on the x axis.
  function stepLine(rows, key, opts = {}) {
    const pts = rows.filter(r => r[key] !== null && r[key] !== undefined);
    return mount({
      grid: { left: 72, right: 16, top: 16, bottom: 48 },
      tooltip: { ...TOOLTIP, trigger: "axis", valueFormatter: v => sig(v) },
      xAxis: categoryAxis(pts.map(r => `#${r.step}`), opts.xName || "step"),
      yAxis: valueAxis(opts.yName || key, "", { scale: true }),
      series: [{ name: opts.yName || key, type: "line", showSymbol: pts.length <= 60, lineStyle: { width: 1.5 },
        itemStyle: { color: opts.color || U.PALETTE[0] }, data: pts.map(r => r[key]) }],
    }, { kind: "lines", height: opts.height || 200 });
  }

  // Horizontal bars, largest on top; names keep both ends when shortened, the tooltip shows them whole.
  function hbars(items, opts = {}) {
    const kind = opts.kind || "ns";
    const { div, unit } = scaleFor(Math.max(0, ...items.map(i => i.value || 0)), kind);
    const labels = U.shortNames(items.map(i => i.name), opts.labelChars || 40);
    return mount({
      grid: { left: 8, right: 72, top: 8, bottom: 40, containLabel: true },
      tooltip: { ...TOOLTIP, trigger: "item", formatter: p => `${items[p.dataIndex].name}\n${fmtUnit(items[p.dataIndex].value, kind)}` +
        (items[p.dataIndex].note ? `\n${items[p.dataIndex].note}` : "") },
      xAxis: valueAxis(opts.xName || "time", unit, { nameGap: 26 }),
      yAxis: { type: "category", inverse: true, data: items.map((_, i) => i),
        axisLabel: { ...AXIS_LABEL, interval: 0, formatter: i => labels[i] } },
      series: [{ type: "bar", barMaxWidth: 22, data: items.map(i => ({ value: (i.value || 0) / div, itemStyle: { color: i.color || U.colorOf(i.name) } })),
        label: { show: true, position: "right", fontSize: FONT, formatter: p => fmtUnit(items[p.dataIndex].value, kind) } }],
    }, { kind: "hbars", height: opts.height || Math.max(120, items.length * 24 + 56),
      on: opts.onClick ? { click: p => opts.onClick(items[p.dataIndex]) } : {} });
  }

  // A donut with its legend; slices keep the colour their name has elsewhere, made lighter or darker where two
  // slices' colours would be nearly the same hue (U.distinctColors).
  function pie(items, opts = {}) {
    const kind = opts.kind || "ns", total = items.reduce((a, i) => a + Math.max(0, i.value || 0), 0);
    const own = U.distinctColors(items.map(i => i.name));
    return mount({
      tooltip: { ...TOOLTIP, trigger: "item", formatter: p => `${p.name}\n${fmtUnit(p.value, kind)} (${sig(p.percent)} %)` },
      legend: legend({ orient: "vertical", left: "52%", top: "middle", formatter: n => {
        // The share first, so a long name cut at the card's edge never hides it.
        const it = items.find(i => i.name === n); return `${total ? sig(100 * Math.max(0, it.value || 0) / total) : 0} %  ${shorten(n, 30)}`; } }),
      series: [{ type: "pie", radius: ["38%", "72%"], center: ["26%", "50%"], avoidLabelOverlap: true, label: { show: false },
        data: items.map((i, k) => ({ name: i.name, value: Math.max(0, i.value || 0), itemStyle: { color: i.color || own[k] } })) }],
    }, { kind: "pie", height: opts.height || 260, on: opts.onClick ? { click: p => opts.onClick(items[p.dataIndex]) } : {} });
  }

  // Lines over time. series: [{name, xs (ns since origin), ys, color, step}]; opts.kind is the y unit.
  // opts.zoom adds a range slider; opts.onRange(t0, t1) gets the selected range in ns; opts.band marks [t0, t1].
  function lines(series, opts = {}) {
    const kind = opts.kind || "bytes";
    const xmax = Math.max(0, ...series.flatMap(s => s.xs)), xmin = Math.min(...series.flatMap(s => s.xs));
    const xs = scaleFor(Math.max(1, xmax - Math.min(0, xmin)), "ns");
    const ymax = Math.max(0, ...series.flatMap(s => s.ys.filter(v => v !== null)));
    const ys = scaleFor(ymax, kind);
    const option = {
      legend: legend(), grid: { left: 72, right: 24, top: 36, bottom: opts.zoom ? 84 : 48 },
      tooltip: { ...TOOLTIP, trigger: "axis", valueFormatter: v => fmtUnit(v * ys.div, kind),
        axisPointer: { label: { formatter: p => `${sig(p.value)} ${xs.unit}` } } },
      xAxis: valueAxis(opts.xName || "time since the first event", xs.unit, { nameGap: 28, min: "dataMin", max: "dataMax" }),
      yAxis: valueAxis(opts.yName || "", ys.unit, kind === "percent" ? { max: v => Math.max(100, v.max) } : {}),
      series: series.map((s, i) => ({ name: s.name, type: "line", step: s.step === false ? undefined : "end", showSymbol: false,
        sampling: "lttb", lineStyle: { width: 1.5 }, itemStyle: { color: s.color || U.PALETTE[i % U.PALETTE.length] },
        data: s.xs.map((x, j) => [x / xs.div, s.ys[j] === null ? null : s.ys[j] / ys.div]),
        markArea: i === 0 && opts.band ? { silent: true, itemStyle: { color: "rgba(47,111,221,0.08)" },
          label: { show: true, position: "insideTop", fontSize: FONT, color: "#2f6fdd" },
          data: [[{ name: opts.band.label, xAxis: opts.band.start / xs.div }, { xAxis: opts.band.end / xs.div }]] } : undefined })),
    };
    if (opts.zoom) option.dataZoom = [{ type: "inside", filterMode: "none" }, { type: "slider", bottom: 8, height: 22, filterMode: "none" }];
    return mount(option, { kind: "lines", height: opts.height || 280, ready: chart => {
      if (!opts.onRange) return;
      chart.on("datazoom", () => {
        const axis = chart.getModel().getComponent("xAxis", 0).axis.scale.getExtent();
        opts.onRange(axis[0] * xs.div, axis[1] * xs.div);
      });
    } });
  }

  // From a base figure to a new one through the changes that make up the difference.
  function waterfall(w, opts = {}) {
    const kind = opts.kind || "ns";
    const names = [opts.baseLabel || "base", ...w.bars.map(b => b.name), opts.newLabel || "new"];
    let level = w.base_ns;
    const offset = [0], up = [null], down = [null], totals = [w.base_ns];
    for (const b of w.bars) {
      const next = level + b.delta_ns;
      offset.push(Math.min(level, next)); up.push(b.delta_ns > 0 ? b.delta_ns : null); down.push(b.delta_ns < 0 ? -b.delta_ns : null);
      totals.push(null); level = next;
    }
    offset.push(0); up.push(null); down.push(null); totals.push(w.new_ns);
    const { div, unit } = scaleFor(Math.max(w.base_ns, w.new_ns, ...offset.map((o, i) => o + (up[i] || 0) + (down[i] || 0))), kind);
    const sc = a => a.map(v => v === null ? null : v / div);
    const deltaOf = i => i === 0 ? `base: ${fmtUnit(w.base_ns, kind)}` : i === names.length - 1 ? `new: ${fmtUnit(w.new_ns, kind)}`
      : `${w.bars[i - 1].delta_ns > 0 ? "+" : "−"}${fmtUnit(Math.abs(w.bars[i - 1].delta_ns), kind)}`;
    return mount({
      grid: { left: 72, right: 16, top: 24, bottom: 24, containLabel: true },
      tooltip: { ...TOOLTIP, trigger: "axis", axisPointer: { type: "shadow" }, formatter: ps => `${names[ps[0].dataIndex]}\n${deltaOf(ps[0].dataIndex)}` },
      xAxis: categoryAxis(names.map((_, i) => i), "", { axisLabel: { ...AXIS_LABEL, interval: 0, rotate: names.length > 6 ? 30 : 0,
        formatter: i => shorten(names[i], 22) } }),
      yAxis: valueAxis(opts.yName || "time per step", unit, { nameGap: 56 }),
      series: [
        { type: "bar", stack: "w", silent: true, itemStyle: { color: "transparent" }, data: sc(offset) },
        { name: "slower", type: "bar", stack: "w", itemStyle: { color: "#e15759" }, data: sc(up) },
        { name: "faster", type: "bar", stack: "w", itemStyle: { color: "#59a14f" }, data: sc(down) },
        { name: "total", type: "bar", stack: "w", itemStyle: { color: "#8a94a6" }, data: sc(totals) },
      ],
    }, { kind: "waterfall", height: opts.height || 320 });
  }

  // Nested time as rectangles (modules): nodes [{name, value, children}]; click drills down.
  function treemap(nodes, opts = {}) {
    const kind = opts.kind || "ns";
    return mount({
      tooltip: { ...TOOLTIP, formatter: p => `${p.data.path || p.name}\n${fmtUnit(p.value, kind)}` +
        (p.data.note ? `\n${p.data.note}` : "") },
      series: [{ type: "treemap", roam: false, nodeClick: "zoomToNode", leafDepth: opts.leafDepth, top: 8, bottom: 36, left: 4, right: 4,
        visibleMin: 400, breadcrumb: { show: true, bottom: 4, itemStyle: { textStyle: { fontSize: FONT } } },
        label: { show: true, fontSize: FONT, lineHeight: 16, formatter: p => `${p.name}\n${fmtUnit(p.value, kind)}` },
        upperLabel: { show: true, height: 22, fontSize: FONT, color: "#fff", formatter: p => `${p.name}  ${fmtUnit(p.value, kind)}` },
        // Parents get a dark frame holding their name; children lighter shades of their parent's colour.
        levels: [{ itemStyle: { borderColor: "#fff", borderWidth: 0, gapWidth: 2 }, upperLabel: { show: false } },
          { itemStyle: { borderColor: "#4a5468", borderWidth: 3, gapWidth: 1 } },
          // A model's direct children get distinct colours; their descendants shades of them.
          { color: U.PALETTE.slice(0, 9), colorSaturation: [0.35, 0.55], itemStyle: { borderWidth: 3, gapWidth: 1, borderColorSaturation: 0.65 } },
          // Deeper levels alike: their frame takes a darker shade so the white name on it stays readable.
          ...Array.from({ length: 7 }, () => ({ colorSaturation: [0.35, 0.55], itemStyle: { borderWidth: 3, gapWidth: 1, borderColorSaturation: 0.65 } }))],
        data: nodes }],
    }, { kind: "treemap", height: opts.height || 420, on: opts.onClick ? { click: p => opts.onClick(p.data) } : {} });
  }

  // A matrix of values (source rank x destination rank).
  function heatmap(xs, ys, cells, opts = {}) {
    const kind = opts.kind || "bytes", max = Math.max(1, ...cells.map(c => c[2]));
    const { div, unit } = scaleFor(max, kind);
    return mount({
      grid: { left: opts.left || 72, right: 110, top: 16, bottom: 56 },
      tooltip: { ...TOOLTIP, formatter: p => `${opts.cellLabel ? opts.cellLabel(xs[p.data[0]], ys[p.data[1]])
        : `${opts.yName || "source"} ${ys[p.data[1]]} → ${opts.xName || "destination"} ${xs[p.data[0]]}`}\n${fmtUnit(p.data[2] * div, kind)}` },
      xAxis: categoryAxis(xs.map(String), opts.xName || "destination rank"),
      yAxis: categoryAxis(ys.map(String), opts.yName || "source rank", { nameGap: opts.left ? opts.left - 24 : 40 }),
      visualMap: { min: 0, max: max / div, calculable: true, orient: "vertical", right: 8, top: "middle", itemHeight: 120,
        text: [`${sig(max / div)} ${unit}`, "0"], textStyle: { fontSize: FONT }, inRange: { color: ["#e8eefb", "#2f6fdd"] } },
      series: [{ type: "heatmap", data: cells.map(([x, y, v]) => [x, y, v / div]),
        label: { show: xs.length <= 8 && ys.length <= 16, fontSize: FONT, formatter: p => `${sig(p.data[2])} ${unit}` } }],
    }, { kind: "heatmap", height: opts.height || Math.max(240, ys.length * 40 + 90) });
  }

  // A whole job's steps (monitor mode): buckets of consecutive steps on a step axis, the median and the
  // slowest step of each (a stall stays visible however many steps a bucket holds), the windows shaded
  // and pinned on top (a window of 30 steps in a job of a million is thinner than a pixel).
  // points: [{first_step, last_step, median_ns, max_ns}]; windows: [{window, reason, first_step, last_step}];
  // opts.onWindow(window): a click anywhere over a window's steps, or on its pin.
  function jobSteps(points, windows, opts = {}) {
    const top = Math.max(1, ...points.map(p => p.max_ns || 0));
    const { div, unit } = scaleFor(top, "ns");
    const at = p => (p.first_step + p.last_step) / 2;
    const line = (name, key, color) => ({ name, type: "line", showSymbol: points.length <= 60, sampling: "lttb",
      lineStyle: { width: 1.5 }, itemStyle: { color }, data: points.map(p => [at(p), p[key] / div]) });
    const series = [line("median step", "median_ns", U.PALETTE[0]), line("slowest step", "max_ns", "#e15759"),
      { name: "windows", type: "scatter", symbol: "pin", symbolSize: 22, itemStyle: { color: "#f28e2b" },
        tooltip: { trigger: "item", formatter: p => { const w = windows[p.dataIndex];
          return `window ${w.window}: ${w.reason}\nsteps ${w.first_step}-${w.last_step}`; } },
        data: windows.map(w => [(w.first_step + w.last_step) / 2, top / div]) }];
    series[0].markArea = { silent: true, itemStyle: { color: "rgba(242,142,43,0.18)" },
      data: windows.map(w => [{ xAxis: w.first_step - 0.5 }, { xAxis: w.last_step + 0.5 }]) };
    const first = points.length ? points[0].first_step : 0, last = points.length ? points[points.length - 1].last_step : 1;
    const hit = step => windows.find(w => step >= w.first_step - 0.5 && step <= w.last_step + 0.5);
    return mount({
      legend: legend(), grid: { left: 72, right: 24, top: 36, bottom: 84 },
      tooltip: { ...TOOLTIP, trigger: "axis", valueFormatter: v => fmtUnit(v * div, "ns"),
        axisPointer: { label: { formatter: p => `step ${Math.round(p.value)}` } } },
      xAxis: valueAxis("step", "", { nameGap: 28, min: first, max: last }),
      yAxis: valueAxis("step time", unit),
      dataZoom: [{ type: "inside", filterMode: "none" }, { type: "slider", bottom: 8, height: 22, filterMode: "none" }],
      series,
    }, { kind: "job-steps", height: opts.height || 320, ready: chart => {
      if (!opts.onWindow) return;
      chart.on("click", p => { if (p.seriesName === "windows") opts.onWindow(windows[p.dataIndex]); });
      chart.getZr().on("click", e => {
        if (!chart.containPixel("grid", [e.offsetX, e.offsetY])) return;
        const w = hit(chart.convertFromPixel({ xAxisIndex: 0, yAxisIndex: 0 }, [e.offsetX, e.offsetY])[0]);
        if (w) opts.onWindow(w);
      });
    } });
  }

  return { mount, disposeAll, bars, hbars, pie, lines, stepLine, waterfall, treemap, heatmap, jobSteps };
})();
