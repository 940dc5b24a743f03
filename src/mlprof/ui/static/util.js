"use strict";
// Small helpers shared by every page: DOM building, fetching, number formats.
const U = (() => {
  function h(tag, attrs, ...children) {
    const el = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
      else if (k === "class") el.className = v;
      else if (k === "dataset") Object.assign(el.dataset, v);
      else if (k === "style") el.style.cssText = v;  // CSSOM: allowed by the page's CSP, unlike style attributes
      else el.setAttribute(k, v === true ? "" : v);
    }
    for (const c of children.flat()) {
      if (c === null || c === undefined || c === false) continue;
      el.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return el;
  }
  async function getJSON(url, signal) {
    const r = await fetch(url, { signal });
    const body = await r.json().catch(() => ({ error: r.statusText }));
    if (!r.ok) throw new Error(body.error || r.statusText);
    return body;
  }
  function query(params) {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(params)) if (v !== null && v !== undefined && v !== "") q.set(k, v);
    return q.toString();
  }
  // A dataset name, or an API path of its own ("/api/advisor", "/api/compare/ops").
  function dataUrl(name, params) { return `${name.startsWith("/") ? name : "/api/data/" + name}?${query(params)}`; }
  function fmtNs(ns) {
    if (ns === null || ns === undefined || Number.isNaN(ns)) return "";
    const a = Math.abs(ns);
    if (a >= 1e9) return (ns / 1e9).toFixed(3) + " s";
    if (a >= 1e6) return (ns / 1e6).toFixed(3) + " ms";
    if (a >= 1e3) return (ns / 1e3).toFixed(3) + " µs";
    return Math.round(ns) + " ns";
  }
  // Axis ticks: three significant digits are enough.
  function fmtNsShort(ns) {
    const a = Math.abs(ns);
    const [v, unit] = a >= 1e9 ? [ns / 1e9, "s"] : a >= 1e6 ? [ns / 1e6, "ms"] : a >= 1e3 ? [ns / 1e3, "µs"] : [ns, "ns"];
    return `${Number(v.toPrecision(3))} ${unit}`;
  }
  function fmtMs(ns) { return ns === null || ns === undefined ? "" : (ns / 1e6).toFixed(3); }
  function fmtBytes(b) {
    if (b === null || b === undefined) return "";
    const u = ["B", "KiB", "MiB", "GiB", "TiB"]; let i = 0, v = Math.abs(b);
    while (v >= 1024 && i < u.length - 1) { v /= 1024; i++; }
    return (b < 0 ? "-" : "") + (i ? v.toFixed(1) : v) + " " + u[i];
  }
  function fmtPct(p) { return p === null || p === undefined ? "" : p.toFixed(2) + " %"; }
  function fmtNum(n) { return n === null || n === undefined ? "" : Number(n).toLocaleString("en-US"); }
  // Stable colour of a name: same op, same colour on every chart and the timeline.
  function colorOf(name, light) {
    let x = 2166136261;
    for (let i = 0; i < name.length; i++) { x ^= name.charCodeAt(i); x = Math.imul(x, 16777619); }
    const hue = (x >>> 0) % 360;
    return `hsl(${hue}, ${light ? 45 : 62}%, ${light ? 78 : 62}%)`;
  }
  const PALETTE = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"];
  function downloads(name, params) {
    const base = { ...params, download: 1 }, file = name.replace(/^\/api\//, "").replace(/\//g, "_");
    return h("span", { class: "downloads" }, "download",
      h("a", { href: dataUrl(name, { ...base, format: "csv" }), download: `${file}.csv`, "data-format": "csv" }, "CSV"),
      h("a", { href: dataUrl(name, { ...base, format: "json" }), download: `${file}.json`, "data-format": "json" }, "JSON"));
  }
  function card(title, dataset, params, ...body) {
    return h("section", { class: "card", dataset: { dataset: dataset || "" } },
      h("div", { class: "card-head" }, h("h2", {}, title), dataset ? downloads(dataset, params) : null), ...body);
  }
  function notAvailable(what) {
    return h("div", { class: "na-box", "data-na": what }, `${what}: not available yet. `,
      "This analysis is not part of mlprof yet; no data is shown rather than made-up data.");
  }
  return { h, getJSON, query, dataUrl, fmtNs, fmtNsShort, fmtMs, fmtBytes, fmtPct, fmtNum, colorOf, PALETTE, downloads, card, notAvailable };
})();
