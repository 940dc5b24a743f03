"use strict";
// SVG charts drawn from dataset rows: stacked bars, pie, horizontal bars, lines.
const Charts = (() => {
  const NS = "http://www.w3.org/2000/svg";
  function s(tag, attrs, ...children) {
    const el = document.createElementNS(NS, tag);
    for (const [k, v] of Object.entries(attrs || {})) if (v !== null && v !== undefined) el.setAttribute(k, v);
    for (const c of children) if (c) el.append(c instanceof Node ? c : document.createTextNode(String(c)));
    return el;
  }
  function title(text) { return s("title", {}, text); }
  function legend(items) {
    return U.h("div", { class: "legend" }, items.map(([name, color]) => U.h("span", { style: `--c:${color}` }, name)));
  }
  function niceMax(v) {
    if (!(v > 0)) return 1;
    const p = Math.pow(10, Math.floor(Math.log10(v)));
    for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= v) return m * p;
    return 10 * p;
  }
  // rows: [{label, values: {series: number}}]; series: [[key, label]]
  function stackedBars(rows, series, opts = {}) {
    const W = opts.width || 640, H = opts.height || 240, L = 64, B = 28, T = 8;
    const fmt = opts.format || U.fmtNs, axisFmt = opts.axisFormat || (opts.format ? fmt : U.fmtNsShort);
    const totals = rows.map(r => series.reduce((a, [k]) => a + Math.max(0, r.values[k] || 0), 0));
    const max = niceMax(Math.max(0, ...totals));
    const svg = s("svg", { viewBox: `0 0 ${W} ${H}`, width: "100%", class: "chart stacked", role: "img" });
    for (let i = 0; i <= 4; i++) {
      const y = T + (H - T - B) * (1 - i / 4);
      svg.append(s("line", { x1: L, x2: W, y1: y, y2: y, stroke: "#e5e7eb" }));
      svg.append(s("text", { x: L - 4, y: y + 4, "text-anchor": "end" }, axisFmt(max * i / 4)));
    }
    const bw = (W - L) / Math.max(1, rows.length);
    rows.forEach((r, i) => {
      let y = H - B;
      series.forEach(([k, label], j) => {
        const v = Math.max(0, r.values[k] || 0), hgt = (H - T - B) * v / max;
        if (hgt <= 0) return;
        y -= hgt;
        svg.append(s("rect", { x: L + i * bw + bw * 0.15, y, width: Math.max(1, bw * 0.7), height: hgt,
          fill: U.PALETTE[j % U.PALETTE.length], "data-series": k }, title(`${r.label}\n${label}: ${fmt(v)}`)));
      });
      if (rows.length <= 40 || i % Math.ceil(rows.length / 40) === 0)
        svg.append(s("text", { x: L + i * bw + bw / 2, y: H - B + 14, "text-anchor": "middle" }, r.label));
    });
    return U.h("div", {}, svg, legend(series.map(([, label], j) => [label, U.PALETTE[j % U.PALETTE.length]])));
  }
  // items: [{name, value}]
  function pie(items, opts = {}) {
    const R = 90, C = 100, fmt = opts.format || U.fmtNs;
    const total = items.reduce((a, it) => a + Math.max(0, it.value || 0), 0);
    const svg = s("svg", { viewBox: "0 0 200 200", width: opts.size || 220, class: "chart pie", role: "img" });
    let a0 = -Math.PI / 2;
    items.forEach((it, j) => {
      const v = Math.max(0, it.value || 0);
      if (!total || !v) return;
      const a1 = a0 + 2 * Math.PI * v / total, large = a1 - a0 > Math.PI ? 1 : 0;
      const color = U.PALETTE[j % U.PALETTE.length];
      const tip = title(`${it.name}: ${fmt(v)} (${(100 * v / total).toFixed(1)} %)`);
      if (v === total) svg.append(s("circle", { cx: C, cy: C, r: R, fill: color }, tip));
      else svg.append(s("path", { d: `M${C},${C} L${C + R * Math.cos(a0)},${C + R * Math.sin(a0)} A${R},${R} 0 ${large} 1 ` +
        `${C + R * Math.cos(a1)},${C + R * Math.sin(a1)} Z`, fill: color, stroke: "#fff", "data-name": it.name }, tip));
      a0 = a1;
    });
    if (!total) svg.append(s("text", { x: C, y: C, "text-anchor": "middle" }, "no data"));
    return U.h("div", { class: "pie-wrap", style: "display:flex;gap:12px;align-items:center;flex-wrap:wrap" }, svg,
      U.h("div", { class: "legend", style: "flex-direction:column" }, items.map((it, j) =>
        U.h("span", { style: `--c:${U.PALETTE[j % U.PALETTE.length]}` },
          `${it.name} — ${total ? (100 * Math.max(0, it.value || 0) / total).toFixed(1) : 0} %`))));
  }
  // items: [{name, value}] drawn as horizontal bars, largest first.
  function hbars(items, opts = {}) {
    const fmt = opts.format || U.fmtNs, W = opts.width || 960, rowH = 18, L = 330;
    const max = Math.max(1e-9, ...items.map(it => it.value || 0));
    const svg = s("svg", { viewBox: `0 0 ${W} ${items.length * rowH + 4}`, width: "100%", class: "chart hbars", role: "img" });
    items.forEach((it, i) => {
      const w = (W - L - 80) * (it.value || 0) / max, y = i * rowH + 2;
      const label = it.name.length > 52 ? it.name.slice(0, 50) + "…" : it.name;
      svg.append(s("text", { x: L - 6, y: y + 12, "text-anchor": "end" }, label, title(it.name)));
      svg.append(s("rect", { x: L, y: y + 2, width: Math.max(1, w), height: rowH - 5, fill: U.colorOf(it.name) },
        title(`${it.name}: ${fmt(it.value)}`)));
      svg.append(s("text", { x: L + w + 4, y: y + 12 }, fmt(it.value)));
    });
    return svg;
  }
  // series: [{name, xs: [ns], ys: [value]}]; x is time (ns), y formatted by opts.format
  function lines(series, opts = {}) {
    const W = opts.width || 720, H = opts.height || 240, L = 70, B = 24, T = 8;
    const fmt = opts.format || U.fmtBytes;
    let x0 = Infinity, x1 = -Infinity, ymax = 0;
    for (const sr of series) sr.xs.forEach((x, i) => { x0 = Math.min(x0, x); x1 = Math.max(x1, x); ymax = Math.max(ymax, sr.ys[i] || 0); });
    const svg = s("svg", { viewBox: `0 0 ${W} ${H}`, width: "100%", class: "chart lines", role: "img" });
    if (!series.length || x0 === Infinity) { svg.append(s("text", { x: W / 2, y: H / 2 }, "no data")); return svg; }
    const ym = niceMax(ymax), span = Math.max(1, x1 - x0);
    for (let i = 0; i <= 4; i++) {
      const y = T + (H - T - B) * (1 - i / 4);
      svg.append(s("line", { x1: L, x2: W, y1: y, y2: y, stroke: "#e5e7eb" }));
      svg.append(s("text", { x: L - 4, y: y + 4, "text-anchor": "end" }, fmt(ym * i / 4)));
    }
    for (let i = 0; i <= 4; i++) svg.append(s("text", { x: L + (W - L - 10) * i / 4, y: H - 6, "text-anchor": i === 4 ? "end" : i ? "middle" : "start" }, U.fmtNsShort(span * i / 4)));
    series.forEach((sr, j) => {
      // A total holds its value until the next sample: draw steps, not slopes.
      const pts = [];
      sr.xs.forEach((x, i) => {
        const px = (L + (W - L - 10) * (x - x0) / span).toFixed(1), py = (T + (H - T - B) * (1 - (sr.ys[i] || 0) / ym)).toFixed(1);
        if (pts.length) pts.push(`${px},${pts[pts.length - 1].split(",")[1]}`);
        pts.push(`${px},${py}`);
      });
      svg.append(s("polyline", { points: pts.join(" "), fill: "none", stroke: U.PALETTE[j % U.PALETTE.length], "stroke-width": 1.5 }, title(sr.name)));
    });
    return U.h("div", {}, svg, legend(series.map((sr, j) => [sr.name, U.PALETTE[j % U.PALETTE.length]])));
  }
  // rows: [{label, values: {key: number}}]; one bar per series side by side (e.g. base vs new).
  function groupedBars(rows, series, opts = {}) {
    const W = opts.width || 640, H = opts.height || 220, L = 64, B = 28, T = 8, fmt = opts.format || U.fmtNs;
    const max = niceMax(Math.max(0, ...rows.flatMap(r => series.map(([k]) => r.values[k] || 0))));
    const svg = s("svg", { viewBox: `0 0 ${W} ${H}`, width: "100%", class: "chart grouped", role: "img" });
    for (let i = 0; i <= 4; i++) {
      const y = T + (H - T - B) * (1 - i / 4);
      svg.append(s("line", { x1: L, x2: W, y1: y, y2: y, stroke: "#e5e7eb" }));
      svg.append(s("text", { x: L - 4, y: y + 4, "text-anchor": "end" }, U.fmtNsShort(max * i / 4)));
    }
    const gw = (W - L) / Math.max(1, rows.length), bw = gw * 0.8 / series.length;
    rows.forEach((r, i) => {
      series.forEach(([k, label], j) => {
        const v = Math.max(0, r.values[k] || 0), hgt = (H - T - B) * v / max;
        svg.append(s("rect", { x: L + i * gw + gw * 0.1 + j * bw, y: H - B - hgt, width: Math.max(1, bw - 1), height: hgt,
          fill: U.PALETTE[j % U.PALETTE.length] }, title(`${r.label} ${label}: ${fmt(v)}`)));
      });
      if (rows.length <= 40 || i % Math.ceil(rows.length / 40) === 0)
        svg.append(s("text", { x: L + i * gw + gw / 2, y: H - B + 14, "text-anchor": "middle" }, r.label));
    });
    svg.classList.add("stacked");
    return U.h("div", {}, svg, legend(series.map(([, label], j) => [label, U.PALETTE[j % U.PALETTE.length]])));
  }
  return { stackedBars, groupedBars, pie, hbars, lines };
})();
