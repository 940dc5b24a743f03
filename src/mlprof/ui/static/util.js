"use strict";
// Helpers shared by every page: DOM building, fetching, units and number formats, links, the page registry.
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
    append(el, children);
    return el;
  }
  // Appends children, skipping null/false (replaceChildren(null) would print "null").
  function append(el, ...children) {
    for (const c of [children].flat(Infinity)) {
      if (c === null || c === undefined || c === false) continue;
      el.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return el;
  }
  function fill(el, ...children) { el.replaceChildren(); return append(el, children); }
  async function fetchOk(url, signal) {
    const r = await fetch(url, { signal });
    if (!r.ok) {
      const body = await r.json().catch(() => ({ error: r.statusText }));
      throw new Error(body.error || r.statusText);
    }
    return r;
  }
  async function getJSON(url, signal) { return (await fetchOk(url, signal)).json(); }
  // Rows of a dataset, and how many there were when the server cut them at its limit.
  async function getRows(url, signal) {
    const r = await fetchOk(url, signal);
    const rows = await r.json(), total = r.headers.get("x-total-rows");
    return { rows, total: total === null ? rows.length : Number(total) };
  }
  function query(params) {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(params)) if (v !== null && v !== undefined && v !== "") q.set(k, v);
    return q.toString();
  }
  // A dataset name, or an API path of its own ("/api/advisor", "/api/compare/ops").
  function dataUrl(name, params) { return `${name.startsWith("/") ? name : "/api/data/" + name}?${query(params)}`; }

  // ---- units: one unit per column or axis, chosen from its largest value, so a column never mixes ns and ms.
  const TIME_UNITS = [[1e9, "s"], [1e6, "ms"], [1e3, "µs"], [1, "ns"]];
  const BYTE_UNITS = [[2 ** 40, "TiB"], [2 ** 30, "GiB"], [2 ** 20, "MiB"], [2 ** 10, "KiB"], [1, "B"]];
  function scaleFor(max, kind) {
    const a = Math.abs(max || 0);
    if (kind === "ns") { const [div, unit] = TIME_UNITS.find(([d]) => a >= d) || [1, "ns"]; return { div, unit }; }
    if (kind === "bytes" || kind === "bytes_per_s") {
      const [div, unit] = BYTE_UNITS.find(([d]) => a >= d) || [1, "B"];
      return { div, unit: kind === "bytes_per_s" ? unit + "/s" : unit };
    }
    if (kind === "percent") return { div: 1, unit: "%" };
    return { div: 1, unit: kind && kind !== "count" ? kind : "" };
  }
  // Three significant digits, no trailing zeros: 238 MiB/s, 1.25 ms, 12.5 %.
  function sig(v) {
    if (v === null || v === undefined || Number.isNaN(v)) return "";
    const a = Math.abs(v);
    if (a === 0) return "0";
    if (a >= 1000) return Math.round(v).toLocaleString("en-US");
    return String(Number(v.toPrecision(3)));
  }
  function fmtUnit(v, kind) {
    if (v === null || v === undefined || Number.isNaN(v)) return "";
    const { div, unit } = scaleFor(v, kind);
    return `${sig(v / div)}${unit ? (unit === "%" ? " %" : " " + unit) : ""}`;
  }
  const fmtNs = v => fmtUnit(v, "ns");
  const fmtBytes = v => fmtUnit(v, "bytes");
  function fmtPct(p) { return p === null || p === undefined ? "" : `${sig(p)} %`; }
  function fmtShare(f) { return f === null || f === undefined ? "" : `${sig(100 * f)} %`; }
  function fmtNum(n) { return n === null || n === undefined ? "" : Number(n).toLocaleString("en-US"); }
  // A column of values in one unit: {fmt, unit} for the header "total (ms)".
  function columnUnit(rows, key, kind) {
    const max = Math.max(0, ...rows.map(r => Math.abs(r[key] || 0)));
    const { div, unit } = scaleFor(max, kind);
    const digits = max / div >= 100 ? 1 : max / div >= 10 ? 2 : 3;
    return { unit, div, fmt: v => fixed(v, div, digits) };
  }
  // A value in a column's unit: fixed decimals, but never a misleading 0.00 for a small non-zero value.
  function fixed(v, div, digits) {
    if (v === null || v === undefined) return "";
    const x = v / div;
    if (x === 0) return "0";
    return x !== 0 && Math.abs(x) < 10 ** -digits * 5 ? String(Number(x.toPrecision(2))) : x.toFixed(digits);
  }
  // Relative times (ns since the run's origin) read on the timeline: "1.234 s".
  function fmtTime(ns) { return ns === null || ns === undefined ? "" : `${(ns / 1e6).toFixed(3)} ms`; }

  // Long names keep both ends: two kernels that differ at the end stay different.
  function shorten(name, max = 48) {
    if (!name || name.length <= max) return name;
    const head = Math.ceil((max - 1) * 0.6), tail = max - 1 - head;
    return name.slice(0, head) + "…" + name.slice(name.length - tail);
  }
  // Short labels that stay distinct: names equal once shortened show where they differ.
  function shortNames(names, max = 48) {
    const short = names.map(n => shorten(n, max));
    const groups = new Map();
    short.forEach((s, i) => { if (!groups.has(s)) groups.set(s, []); groups.get(s).push(i); });
    for (const idx of groups.values()) {
      if (idx.length < 2) continue;
      for (const i of idx) {
        const name = names[i];
        // First position where this name differs from another of its group.
        let d = 0;
        for (const j of idx) if (j !== i) { let k = 0; while (k < name.length && name[k] === names[j][k]) k++; d = Math.max(d, k); }
        const part = Math.floor((max - 2) / 3);
        short[i] = d <= part ? shorten(name, max) : `${name.slice(0, part)}…${name.slice(Math.max(part, d - 4), d - 4 + part)}…${name.slice(-part)}`;
      }
    }
    return short;
  }
  // Stable colour of a name: same op, same colour on every chart and on the timeline.
  function colorOf(name, light) {
    let x = 2166136261;
    for (let i = 0; i < name.length; i++) { x ^= name.charCodeAt(i); x = Math.imul(x, 16777619); }
    const hue = (x >>> 0) % 360;
    return `hsl(${hue}, ${light ? 45 : 58}%, ${light ? 78 : 58}%)`;
  }
  const PALETTE = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"];
  // One colour per concept, the same on every chart of every page: a phase of the step, a device category,
  // a cause of device idle. Names that are one concept share an entry (host and device communication; a
  // kernel and device computing are compute; the runtime category is device idle while the host synchronizes),
  // and no two concepts share a colour.
  const CONCEPT_COLORS = {
    data_loading: "#f28e2b", forward: "#4e79a7", backward: "#86bcb6", optimizer: "#59a14f",
    communication: "#b07aa1", communication_not_overlapped: "#7a4f78", gc: "#9d7660", python: "#edc948",
    synchronization: "#d37295", launch: "#79706e", compute: "#2c8c99", memcpy: "#ff9d9a", memset: "#d7b5a6",
    preparing: "#ffbe7d", idle: "#d3d0cc", wait: "#b6992d", cpu_exec: "#8cd17d", other: "#bab0ac",
  };
  const SAME_CONCEPT = {
    host_communication: "communication", other_ops: "other", kernel: "compute", computing: "compute",
    runtime: "synchronization", free: "idle",
  };
  // A concept's colour ("forward", "forward_ns", "kernel"); a name that is no concept gets its stable hash colour.
  function conceptColor(key) {
    const k = String(key).replace(/_ns$/, "");
    return CONCEPT_COLORS[SAME_CONCEPT[k] || k] || colorOf(k);
  }

  // The colours of one chart's items, in order (largest first): each name's own colour (conceptColor), unless
  // an item before it already has a hash colour of nearly its hue (two ops 10 degrees apart read as one slice);
  // then the same hue darker or lighter, so the colour still reads as that name's family.
  const NEAR_HUE = 24, LIGHTNESS = [58, 38, 76, 28, 86];
  function distinctColors(names) {
    const used = [];
    return names.map(n => {
      const c = conceptColor(n), m = /^hsl\((\d+), \d+%, \d+%\)$/.exec(c);
      if (!m) return c;
      const hue = +m[1];
      const taken = used.filter(u => Math.min(Math.abs(u.hue - hue), 360 - Math.abs(u.hue - hue)) < NEAR_HUE)
        .map(u => u.light);
      const light = LIGHTNESS.find(l => !taken.includes(l)) ?? LIGHTNESS[0];
      used.push({ hue, light });
      return `hsl(${hue}, 58%, ${light}%)`;
    });
  }

  function runHref(run, page, params) {
    const q = query(params || {});
    return `#/run/${encodeURIComponent(run)}/${page}${q ? "?" + q : ""}`;
  }
  // What a page's user chose (a table's filter and sort, an op drilled into) kept in the page's URL, so Back,
  // a reload and a shared link show it again. replace: the current entry (typing a filter); push: a new one
  // (a drill-down, which Back leaves). Changing the hash this way does not render the page again.
  function hashParams() { return Object.fromEntries(new URLSearchParams(location.hash.split("?")[1] || "")); }
  function setHashParams(params, push = false) {
    const [path, q] = location.hash.split("?");
    const next = new URLSearchParams(q || "");
    for (const [k, v] of Object.entries(params)) {
      if (v === null || v === undefined || v === "") next.delete(k); else next.set(k, v);
    }
    const s = next.toString(), url = `${path}${s ? "?" + s : ""}`;
    if (url === location.hash) return;
    if (push) history.pushState(null, "", url); else history.replaceState(null, "", url);
  }
  // The timeline at one slice ({src, id}), the longest call of a name ({name, step}), or a step ({step}).
  function timelineHref(run, target) { return runHref(run, "timeline", target); }
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
  function naBox(text, id) { return h("p", { class: "na-box", id: id || null }, text); }
  function tiles(items) {
    return h("div", { class: "tiles" }, items.filter(Boolean).map(([label, value, note, id]) =>
      h("div", { class: "tile", id: id || null }, h("div", { class: "tile-label" }, label),
        h("div", { class: "tile-value" }, value), note ? h("div", { class: "tile-note" }, note) : null)));
  }

  // Pages register themselves: [key, label, render(ctx)]; the menu lists them in this order.
  const ORDER = ["overview", "advisor", "operators", "kernels", "timeline", "step_trace", "whole_job", "modules", "callsites",
    "data_loading", "memory", "host", "compare", "cluster"];
  const pages = new Map();
  function page(key, label, render) { pages.set(key, { key, label, render }); }
  function pageList() { return ORDER.filter(k => pages.has(k)).map(k => pages.get(k)); }

  return { h, append, fill, getJSON, getRows, query, dataUrl, scaleFor, sig, fmtUnit, fmtNs, fmtBytes, fmtPct, fmtShare,
    fmtNum, columnUnit, fixed, fmtTime, shorten, shortNames, colorOf, PALETTE, conceptColor, distinctColors, runHref, timelineHref, downloads, card, naBox,
    tiles, page, pageList, hashParams, setHashParams };
})();
