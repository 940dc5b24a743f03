"use strict";
// The timeline: a canvas of tracks drawn from level-of-detail answers of
// /api/timeline/window. The browser holds only the answer for the current view;
// every zoom or pan asks the server again (the previous request is aborted).
// Keys as in chrome://tracing: W/S zoom in/out, A/D pan; 0 resets; F frames the selection.
const Timeline = (() => {
  const { h, getJSON, query, fmtNs, colorOf } = U;
  const LABEL_W = 230, ROW_H = 16, GROUP_H = 18, COUNTER_H = 36, TRACK_GAP = 4, AXIS_H = 24;
  const SOURCES = ["host_ops", "runtime_calls", "device_ops", "steps", "markers", "gc_pauses"];
  let st = null;

  function mount(el, run, q) {
    unmount();
    const canvas = h("canvas", { id: "tl-canvas", tabindex: "0", "aria-label": "timeline" });
    const axis = h("canvas", { id: "tl-axis" });
    const wrap = h("div", { id: "tl-wrap" }, canvas);
    const details = h("div", { id: "tl-details", class: "card" }, h("span", { class: "muted" }, "Click a slice for its details."));
    const searchBox = h("input", { type: "search", id: "tl-search", placeholder: "search names…", "aria-label": "search slices by name" });
    const searchInfo = h("span", { id: "tl-search-info", class: "muted" });
    const viewInfo = h("span", { id: "tl-view", class: "muted" });
    const legend = h("div", { id: "tl-legend", "aria-label": "colour legend" });
    // Every flow at once is a web of lines over a busy run: by default only the selected slice's are drawn.
    const flowsBox = h("input", { type: "checkbox", id: "tl-flows", checked: false });
    const stepBox = h("select", { id: "tl-step", "aria-label": "show one step" }, h("option", { value: "" }, "all captured steps"));
    // The answer behind the current picture, as JSON (what the canvas shows, merged blocks included).
    const download = h("a", { id: "tl-download", download: "timeline_window.json", "data-format": "json" }, "JSON");
    const downloadCsv = h("a", { id: "tl-download-csv", download: "timeline_window.csv", "data-format": "csv" }, "CSV");
    st = { run, canvas, axis, wrap, details, searchInfo, viewInfo, legend, searchBox, range: null, flowsBox, stepBox, jumpTo, download, downloadCsv, meta: null, layout: [], byTrack: new Map(),
      view: { t0: 0, t1: 1 }, answer: null, ctrl: null, requests: 0, answers: 0, selected: null, hits: null, hit: -1,
      mouseX: null, drag: null, timer: null, listeners: [], collapsed: new Set() };
    const toolbar = h("div", { id: "tl-toolbar" },
      h("button", { onclick: () => zoom(0.5), title: "zoom in (W)" }, "+"), h("button", { onclick: () => zoom(2), title: "zoom out (S)" }, "−"),
      h("button", { onclick: () => pan(-0.25), title: "pan left (A)" }, "◀"), h("button", { onclick: () => pan(0.25), title: "pan right (D)" }, "▶"),
      h("button", { onclick: reset, id: "tl-reset", title: "the captured steps (0)" }, "fit steps"),
      h("button", { onclick: wholeJob, id: "tl-whole", title: "everything recorded, host samples of the whole job included" }, "whole job"),
      stepBox, h("label", { title: "the selected slice's flows are drawn whenever at most 500 are in view" }, flowsBox, " all flows"), searchBox,
      h("button", { onclick: () => runSearch(searchBox.value), id: "tl-find" }, "find"),
      h("button", { onclick: () => stepHit(-1), title: "previous match" }, "‹"), h("button", { onclick: () => stepHit(1), title: "next match" }, "›"),
      searchInfo, viewInfo, h("span", { class: "downloads" }, "download view", downloadCsv, download));
    el.replaceChildren(h("h1", {}, "Timeline"), toolbar,
      h("p", { class: "hint" }, "W/S or Ctrl+wheel: zoom · A/D, drag or Shift+wheel: pan · click: details · Shift+drag: statistics of a time range · click a track's name: fold or unfold it · 0: the captured steps · F: frame selection"),
      legend, axis, wrap, details);
    searchBox.addEventListener("keydown", e => { if (e.key === "Enter") runSearch(searchBox.value); });
    flowsBox.addEventListener("change", draw);
    stepBox.addEventListener("change", () => { if (!frameStep(stepBox.value)) reset(); });
    listen(document, "keydown", onKey);
    listen(window, "resize", () => { sizeCanvas(); draw(); fetchView(); });
    listen(canvas, "wheel", onWheel, { passive: false });
    listen(canvas, "mousedown", e => {
      const x = e.clientX - canvas.getBoundingClientRect().left;
      if (e.shiftKey && x >= LABEL_W) { st.range = { t0: tOf(x), t1: tOf(x), dragging: true }; canvas.style.cursor = "col-resize"; return; }
      st.drag = { x: e.clientX, t0: st.view.t0, t1: st.view.t1, moved: false }; canvas.style.cursor = "grabbing";
    });
    listen(window, "mousemove", onMove);
    listen(window, "mouseup", onUp);
    listen(wrap, "scroll", draw);
    const s0 = st;
    getJSON(`/api/timeline/meta?${query({ run })}`).then(meta => {
      if (st !== s0) return;
      st.meta = meta;
      st.collapsed = new Set(meta.tracks.filter(collapsesByDefault).map(t => t.id));
      for (const x of meta.steps) stepBox.append(h("option", { value: x.step, selected: q && String(q.step) === String(x.step) }, `step ${x.step}`));
      buildLayout();
      requestAnimationFrame(() => {
        if (st !== s0) return;
        sizeCanvas();
        // Opens on what the link points at: one slice, the longest call of a name, a step, else the captured steps.
        if (q && ((q.src !== undefined && q.id !== undefined) || q.name)) jumpTo(q.src !== undefined ? { src: q.src, id: q.id } : { name: q.name, step: q.step });
        else if (!(q && q.step !== undefined && frameStep(q.step))) reset();
        if (q && q.find) { searchBox.value = q.find; runSearch(q.find); }
      });
    }).catch(e => { details.replaceChildren(h("p", { class: "na-box" }, `Could not load the timeline: ${e.message}`)); });
  }

  function listen(target, type, fn, opts) { target.addEventListener(type, fn, opts); st.listeners.push([target, type, fn, opts]); }

  function unmount() {
    if (!st) return;
    for (const [t, type, fn, opts] of st.listeners) t.removeEventListener(type, fn, opts);
    if (st.ctrl) st.ctrl.abort();
    clearTimeout(st.timer);
    st = null;
  }

  // A Python track nests as deep as the job's call stack (24 levels on an Ascend run, above the device
  // streams): it opens collapsed to its outermost row. A click on a track's name folds or unfolds it.
  const collapsesByDefault = t => t.kind !== "counter" && t.max_depth > 0 && / python$/.test(t.name);
  const foldable = t => t.kind !== "counter" && t.max_depth > 0;

  function buildLayout() {
    let y = 0, group = null;
    st.layout = []; st.byTrack = new Map(); st.groups = [];
    for (const t of st.meta.tracks) {
      if (t.group !== group) { group = t.group; st.groups.push({ name: group, y }); y += GROUP_H; }
      const rows = t.kind === "counter" ? 0 : st.collapsed.has(t.id) ? 1 : t.max_depth + 1;
      const height = t.kind === "counter" ? COUNTER_H : rows * ROW_H;
      const item = { ...t, y, height, rows };
      st.layout.push(item); st.byTrack.set(t.id, item);
      y += height + TRACK_GAP;
    }
    st.height = Math.min(y + 8, 30000);
  }

  function sizeCanvas() {
    const dpr = window.devicePixelRatio || 1, w = Math.max(300, st.wrap.clientWidth - 2);
    st.width = w;
    for (const [c, hgt] of [[st.canvas, st.height], [st.axis, AXIS_H]]) {
      c.width = Math.round(w * dpr); c.height = Math.round(hgt * dpr);
      c.style.width = w + "px"; c.style.height = hgt + "px";
      c.getContext("2d").setTransform(dpr, 0, 0, dpr, 0, 0);
    }
  }

  const plotW = () => st.width - LABEL_W;
  const xOf = t => LABEL_W + (t - st.view.t0) * plotW() / (st.view.t1 - st.view.t0);
  const tOf = x => st.view.t0 + (x - LABEL_W) * (st.view.t1 - st.view.t0) / plotW();

  function setView(t0, t1) {
    const span = st.meta.span_ns || 1, minSpan = 100, margin = span * 0.05;
    let w = Math.max(minSpan, Math.min(t1 - t0, span + 2 * margin));
    t0 = Math.max(-margin, Math.min(t0, span + margin - w));
    st.view = { t0, t1: t0 + w };
    st.viewInfo.textContent = `${U.fmtTime(st.view.t0)} – ${U.fmtTime(st.view.t1)} (${fmtNs(w)})`;
    st.canvas.dataset.t0 = String(Math.round(st.view.t0)); st.canvas.dataset.t1 = String(Math.round(st.view.t1));
    draw();
    // An answer for an older view must not land after this one: abort it now.
    if (st.ctrl) { st.ctrl.abort(); st.ctrl = null; }
    clearTimeout(st.timer);
    st.timer = setTimeout(fetchView, 15);
  }
  // The captured steps: the host sampler may have run for the whole job, the profiler only for its window.
  function reset() {
    const w = st.meta.window, pad = (w.end - w.start) * 0.01;
    setView(w.start - pad, w.end + pad);
  }
  function wholeJob() { setView(0, st.meta.span_ns || 1); }
  function frameStep(step) {
    const s = st.meta.steps.find(x => String(x.step) === String(step));
    if (!s) return false;
    st.stepBox.value = String(s.step);
    setView(s.start - (s.end - s.start) * 0.02, s.end + (s.end - s.start) * 0.02);
    return true;
  }
  // Frames one slice and selects it: {src, id} or the longest slice of {name, step}.
  async function jumpTo(target) {
    const s0 = st;
    try {
      const x = await getJSON(`/api/timeline/locate?${query({ run: st.run, ...target })}`);
      if (st !== s0) return;
      const dur = Math.max(1, x.end - x.start), pad = Math.max(dur * 0.5, 2000);
      setView(x.start - pad, x.end + pad);
      const tr = st.byTrack.get(x.track);
      if (tr) st.wrap.scrollTop = Math.max(0, tr.y + x.depth * ROW_H - st.wrap.clientHeight / 2);
      select({ track: x.track, depth: x.depth, start: x.start, dur, name: x.name, count: 1, src: x.src, id: x.id, trackName: tr ? tr.name : "" });
    } catch (e) {
      if (st !== s0) return;
      reset();
      st.details.replaceChildren(h("p", { class: "na-box", id: "tl-not-found" },
        target.name ? `No slice named ${target.name}${target.step ? " in step " + target.step : ""} on this timeline.` : `That slice is not on this timeline (${e.message}).`));
    }
  }
  function zoom(factor, atX) {
    const x = atX ?? st.mouseX ?? (LABEL_W + plotW() / 2), t = tOf(Math.max(LABEL_W, x));
    setView(t - (t - st.view.t0) * factor, t + (st.view.t1 - t) * factor);
  }
  function pan(fraction) { const w = st.view.t1 - st.view.t0; setView(st.view.t0 + w * fraction, st.view.t1 + w * fraction); }

  async function fetchView() {
    if (!st || !st.meta) return;
    if (st.ctrl) st.ctrl.abort();
    const ctrl = new AbortController(), s0 = st, v = { ...st.view };
    st.ctrl = ctrl; st.requests++; st.canvas.dataset.requests = String(st.requests);
    const t0 = Math.floor(Math.max(0, v.t0)), t1 = Math.ceil(Math.max(t0 + 1, v.t1));
    try {
      const url = `/api/timeline/window?${query({ run: st.run, t0, t1, px: Math.round(plotW()) })}`;
      st.download.href = url + "&format=json&download=1";
      st.downloadCsv.href = url + "&format=csv&download=1";
      const a = await getJSON(url, ctrl.signal);
      if (st !== s0 || ctrl.signal.aborted) return;
      st.answer = a; st.answers++;
      st.legend.replaceChildren(...TimelineRange.legend(a, st.view, name => jumpTo({ name })));
      st.canvas.dataset.answers = String(st.answers);
      st.canvas.dataset.answerT0 = String(a.t0); st.canvas.dataset.answerT1 = String(a.t1);
      draw();
    } catch (e) {
      if (e.name !== "AbortError" && st === s0) st.viewInfo.textContent = `error: ${e.message}`;
    }
  }

  // A tick's label is in the unit of the view's magnitude (100.8 ms, not 100800 µs), with the
  // decimals that tell it from its neighbour.
  function tickLabel(t, step, magnitude) {
    const [unit, name] = magnitude >= 1e9 ? [1e9, "s"] : magnitude >= 1e6 ? [1e6, "ms"] : magnitude >= 1e3 ? [1e3, "µs"] : [1, "ns"];
    const decimals = Math.min(9, Math.max(0, Math.ceil(-Math.log10(step / unit) - 1e-9)));
    return `${(t / unit).toFixed(decimals)} ${name}`;
  }

  function drawAxis() {
    const c = st.axis.getContext("2d"), w = st.width, span = st.view.t1 - st.view.t0;
    c.clearRect(0, 0, w, AXIS_H); c.fillStyle = "#fafbfc"; c.fillRect(0, 0, w, AXIS_H);
    const raw = span / 8, p = Math.pow(10, Math.floor(Math.log10(raw)));
    const step = [1, 2, 5, 10].map(m => m * p).find(s => s >= raw);
    c.fillStyle = "#1d2330"; c.strokeStyle = "#c4c9d4"; c.font = "11px system-ui"; c.textBaseline = "middle";
    for (let t = Math.ceil(st.view.t0 / step) * step; t <= st.view.t1; t += step) {
      const x = xOf(t); c.beginPath(); c.moveTo(x, AXIS_H - 6); c.lineTo(x, AXIS_H); c.stroke();
      c.fillText(tickLabel(t, step, Math.max(Math.abs(st.view.t0), Math.abs(st.view.t1))), x + 3, AXIS_H / 2);
    }
    c.fillStyle = "#fafbfc"; c.fillRect(0, 0, LABEL_W, AXIS_H);
    c.fillStyle = "#667085"; c.fillText("time since first event", 6, AXIS_H / 2);
  }

  function draw() {
    if (!st || !st.meta || !st.width) return;
    drawAxis();
    const c = st.canvas.getContext("2d"), W = st.width;
    const top = st.wrap.scrollTop - 50, bottom = st.wrap.scrollTop + st.wrap.clientHeight + 50;
    c.clearRect(0, 0, W, st.height); c.fillStyle = "#fff"; c.fillRect(0, 0, W, st.height);
    let drawn = 0;
    const a = st.answer;
    if (a) {
      const s = a.slices, scale = plotW() / (st.view.t1 - st.view.t0);
      c.font = "11px system-ui"; c.textBaseline = "middle";
      for (let i = 0; i < s.track.length; i++) {
        const tr = st.byTrack.get(s.track[i]);
        if (!tr || s.depth[i] >= tr.rows) continue;  // under a folded track's first row
        const y = tr.y + s.depth[i] * ROW_H;
        if (y + ROW_H < top || y > bottom) continue;
        const start = a.t0 + s.start[i];
        let x0 = LABEL_W + (start - st.view.t0) * scale, x1 = x0 + s.dur[i] * scale;
        if (x1 < LABEL_W || x0 > W) continue;
        x0 = Math.max(LABEL_W, x0); x1 = Math.min(W, Math.max(x1, x0 + 1));
        const name = a.names[s.name[i]], merged = s.count[i] > 1;
        c.fillStyle = colorOf(name, merged);
        c.fillRect(x0, y + 1, x1 - x0, ROW_H - 2);
        drawn++;
        if (x1 - x0 > 28) {
          c.fillStyle = "#1d2330";
          const label = merged ? `${s.count[i]} × (${name}…)` : name;
          c.save(); c.beginPath(); c.rect(x0 + 2, y, x1 - x0 - 4, ROW_H); c.clip();
          c.fillText(label, x0 + 3, y + ROW_H / 2); c.restore();
        }
      }
      drawCounters(c, a, scale);
      if (a.flows) drawFlows(c, a, scale, !st.flowsBox.checked);
    }
    drawSelection(c);
    drawRange(c);
    // Track labels over the left column.
    c.fillStyle = "#f6f7f9"; c.fillRect(0, 0, LABEL_W, st.height);
    c.font = "12px system-ui"; c.textBaseline = "middle";
    for (const g of st.groups) { c.fillStyle = "#1d2330"; c.font = "bold 12px system-ui"; c.fillText(g.name.slice(0, 34), 6, g.y + GROUP_H / 2); }
    c.font = "12px system-ui";
    for (const t of st.layout) {
      const mark = foldable(t) ? (st.collapsed.has(t.id) ? `▸ ` : `▾ `) : "";
      const levels = foldable(t) && st.collapsed.has(t.id) ? ` (${t.max_depth + 1} levels)` : "";
      c.fillStyle = "#445"; c.fillText(mark + t.name.slice(0, 30 - levels.length) + levels, 4, t.y + ROW_H / 2);
      c.strokeStyle = "#eef0f3"; c.beginPath(); c.moveTo(0, t.y + t.height + TRACK_GAP / 2); c.lineTo(W, t.y + t.height + TRACK_GAP / 2); c.stroke();
    }
    st.canvas.dataset.drawn = String(drawn);
  }

  function drawCounters(c, a, scale) {
    const k = a.counters, byTrack = new Map();
    for (let i = 0; i < k.track.length; i++) {
      if (!byTrack.has(k.track[i])) byTrack.set(k.track[i], []);
      byTrack.get(k.track[i]).push([a.t0 + k.ts[i], k.value[i]]);
    }
    // The last sample before the view holds until the next one: a slow sampler's track is not blank when zoomed in.
    for (const [track, v] of k.before || []) {
      if (!byTrack.has(track)) byTrack.set(track, []);
      byTrack.get(track).unshift([st.view.t0, v]);
    }
    for (const [track, pts] of byTrack) {
      const tr = st.byTrack.get(track); if (!tr) continue;
      const max = Math.max(1e-9, ...pts.map(p => p[1]));
      c.fillStyle = "rgba(47,111,221,0.35)"; c.strokeStyle = "#2f6fdd"; c.beginPath();
      const yOf = v => tr.y + COUNTER_H - 2 - (COUNTER_H - 6) * v / max;
      c.moveTo(Math.max(LABEL_W, xOf(pts[0][0])), tr.y + COUNTER_H - 2);
      let lastY = yOf(pts[0][1]);
      for (const [t, v] of pts) { const x = Math.max(LABEL_W, xOf(t)); c.lineTo(x, lastY); lastY = yOf(v); c.lineTo(x, lastY); }
      c.lineTo(st.width, lastY); c.lineTo(st.width, tr.y + COUNTER_H - 2); c.closePath(); c.fill(); c.stroke();
      const top = Math.max(...pts.map(p => p[1]));  // the label says the real maximum (0 for an idle disk)
      c.fillStyle = "#1d2330"; c.fillText(`max ${top > 0 ? U.fmtUnit(top, tr.unit || "") : "0"}`, LABEL_W + 4, tr.y + 8);
    }
    void scale;
  }

  function drawFlows(c, a, scale, selectedOnly) {
    const sel = st.selected;
    if (selectedOnly && !sel) return;
    const touches = (track, depth, start) => track === sel.track && depth === sel.depth && a.t0 + start === sel.start;
    c.strokeStyle = "rgba(80,80,80,0.55)"; c.fillStyle = "rgba(80,80,80,0.7)"; c.lineWidth = 1;
    for (const [ft, fd, fs, tt, td, ts] of a.flows) {
      if (selectedOnly && !touches(ft, fd, fs) && !touches(tt, td, ts)) continue;
      const A = st.byTrack.get(ft), B = st.byTrack.get(tt); if (!A || !B) continue;
      const x0 = LABEL_W + (a.t0 + fs - st.view.t0) * scale, x1 = LABEL_W + (a.t0 + ts - st.view.t0) * scale;
      const y0 = A.y + Math.min(fd, A.rows - 1) * ROW_H + ROW_H / 2, y1 = B.y + Math.min(td, B.rows - 1) * ROW_H + ROW_H / 2;
      if (Math.max(x0, x1) < LABEL_W) continue;
      c.beginPath(); c.moveTo(x0, y0); c.lineTo(x1, y1); c.stroke();
      const ang = Math.atan2(y1 - y0, x1 - x0);
      c.beginPath(); c.moveTo(x1, y1); c.lineTo(x1 - 6 * Math.cos(ang - 0.4), y1 - 6 * Math.sin(ang - 0.4));
      c.lineTo(x1 - 6 * Math.cos(ang + 0.4), y1 - 6 * Math.sin(ang + 0.4)); c.closePath(); c.fill();
    }
  }

  function drawSelection(c) {
    const sel = st.selected; if (!sel) return;
    const tr = st.byTrack.get(sel.track); if (!tr) return;
    const x0 = Math.max(LABEL_W, xOf(sel.start)), x1 = Math.max(x0 + 2, xOf(sel.start + sel.dur));
    c.strokeStyle = "#e11d48"; c.lineWidth = 2; c.strokeRect(x0, tr.y + sel.depth * ROW_H, x1 - x0, ROW_H); c.lineWidth = 1;
  }

  // The selected time range: a band over every track, its edges marked.
  function drawRange(c) {
    const r = st.range; if (!r) return;
    const x0 = Math.max(LABEL_W, xOf(Math.min(r.t0, r.t1))), x1 = Math.min(st.width, xOf(Math.max(r.t0, r.t1)));
    if (x1 <= x0) return;
    c.fillStyle = "rgba(47,111,221,0.12)"; c.fillRect(x0, 0, x1 - x0, st.height);
    c.strokeStyle = "#2f6fdd"; c.beginPath(); c.moveTo(x0, 0); c.lineTo(x0, st.height); c.moveTo(x1, 0); c.lineTo(x1, st.height); c.stroke();
  }

  function hitTest(x, y) {
    const a = st.answer; if (!a || x < LABEL_W) return null;
    const tr = trackAt(y); if (!tr || tr.kind === "counter") return null;
    const depth = Math.floor((y - tr.y) / ROW_H), s = a.slices, tol = 2 * (st.view.t1 - st.view.t0) / plotW();
    const t = tOf(x);
    let best = null;
    for (let i = 0; i < s.track.length; i++) {
      if (s.track[i] !== tr.id || s.depth[i] !== depth) continue;
      const start = a.t0 + s.start[i];
      if (t >= start - tol && t <= start + s.dur[i] + tol && (!best || s.dur[i] < best.dur))
        best = { track: tr.id, depth, start, dur: s.dur[i], name: a.names[s.name[i]], count: s.count[i], busy: s.busy[i], src: s.src[i], id: s.id[i], trackName: tr.name };
    }
    return best;
  }

  // Folds or unfolds a track; the canvas grows or shrinks with it.
  function setFolded(track, folded) {
    if (folded === st.collapsed.has(track.id)) return;
    if (folded) st.collapsed.add(track.id); else st.collapsed.delete(track.id);
    buildLayout(); sizeCanvas(); draw(); fetchView();
  }
  function trackAt(y) { return st.layout.find(t => y >= t.y && y < t.y + t.height); }

  async function select(sel) {
    // A slice found by search or a link may lie under a folded track's first row: unfold it.
    const home = sel && st.byTrack.get(sel.track);
    if (home && sel.depth >= home.rows) setFolded(home, false);
    st.selected = sel; st.range = null; draw();
    const d = st.details;
    delete d.dataset.range; delete d.dataset.pending;  // a range's answer arriving later must not replace this
    if (!sel) { d.replaceChildren(h("span", { class: "muted" }, "Click a slice for its details.")); return; }
    const head = h("div", {}, h("h2", {}, sel.name), h("div", { class: "muted" },
      `${sel.trackName || ""} · start ${U.fmtTime(sel.start)} · duration ${fmtNs(sel.dur)}`));
    if (sel.count > 1 || sel.src === null || sel.src === undefined) {
      d.replaceChildren(head, h("p", { id: "tl-merged" }, `${sel.count} slices merged at this zoom (busy ${fmtNs(sel.busy)}); the longest is shown by name.`),
        h("button", { onclick: () => setView(sel.start - sel.dur * 0.1, sel.start + sel.dur * 1.1) }, "zoom to them"));
      return;
    }
    d.replaceChildren(head, h("p", { class: "muted" }, "loading…"));
    try {
      const ev = await getJSON(`/api/timeline/event?${query({ run: st.run, src: sel.src, id: sel.id })}`);
      if (st.selected !== sel) return;
      d.replaceChildren(head, ...TimelineDetails.render(ev, st.run, target => st.jumpTo(target)));
    } catch (e) { d.replaceChildren(head, h("p", { class: "na-box" }, e.message)); }
  }

  async function runSearch(text) {
    text = (text || "").trim(); if (!text) return;
    st.searchInfo.textContent = "searching…";
    try {
      const r = await getJSON(`/api/timeline/search?${query({ run: st.run, q: text })}`);
      st.hits = r; st.hit = -1;
      st.searchInfo.textContent = r.total ? `${r.total} match(es)` : "no match";
      if (r.hits.length) stepHit(1);
    } catch (e) { st.searchInfo.textContent = e.message; }
  }

  function stepHit(dir) {
    const r = st.hits; if (!r || !r.hits.length) return;
    st.hit = (st.hit + dir + r.hits.length) % r.hits.length;
    const x = r.hits[st.hit], dur = Math.max(1, x.end - x.start), pad = Math.max(dur * 2, 2000);
    st.searchInfo.textContent = `${st.hit + 1} of ${r.total}${r.truncated ? " (first " + r.hits.length + " listed)" : ""}`;
    setView(x.start - pad, x.end + pad);
    const tr = st.byTrack.get(x.track);
    if (tr) st.wrap.scrollTop = Math.max(0, tr.y + x.depth * ROW_H - st.wrap.clientHeight / 2);
    select({ track: x.track, depth: x.depth, start: x.start, dur, name: x.name, count: 1, src: x.src, id: x.id, trackName: tr ? tr.name : "" });
  }

  function onKey(e) {
    if (!st || !st.meta) return;
    const tag = (e.target.tagName || "").toLowerCase();
    if (tag === "input" || tag === "select" || tag === "textarea" || e.ctrlKey || e.metaKey || e.altKey) return;
    const k = e.key.toLowerCase();
    if (k === "w") zoom(0.8); else if (k === "s") zoom(1.25);
    else if (k === "a") pan(-0.1); else if (k === "d") pan(0.1);
    else if (k === "0") reset();
    else if (k === "f" && st.selected) setView(st.selected.start - st.selected.dur * 0.1, st.selected.start + st.selected.dur * 1.1);
    else return;
    e.preventDefault();
  }

  function onWheel(e) {
    const rect = st.canvas.getBoundingClientRect(), x = e.clientX - rect.left;
    if (e.ctrlKey || e.altKey || e.metaKey) { e.preventDefault(); zoom(e.deltaY > 0 ? 1.2 : 1 / 1.2, x); }
    else if (e.shiftKey || Math.abs(e.deltaX) > Math.abs(e.deltaY)) {
      e.preventDefault(); const d = e.shiftKey ? e.deltaY : e.deltaX;
      pan(d / plotW());
    }
  }

  function onMove(e) {
    if (!st) return;
    const rect = st.canvas.getBoundingClientRect();
    st.mouseX = e.clientX - rect.left;
    if (st.range && st.range.dragging) { st.range.t1 = tOf(Math.max(LABEL_W, Math.min(st.width, st.mouseX))); draw(); return; }
    if (!st.drag) return;
    const dx = e.clientX - st.drag.x;
    if (Math.abs(dx) > 3) st.drag.moved = true;
    if (st.drag.moved) {
      const dt = dx * (st.drag.t1 - st.drag.t0) / plotW();
      setView(st.drag.t0 - dt, st.drag.t1 - dt);
    }
  }

  function onUp(e) {
    if (st && st.range && st.range.dragging) {
      const r = st.range, t0 = Math.min(r.t0, r.t1), t1 = Math.max(r.t0, r.t1);
      st.canvas.style.cursor = "grab";
      if ((t1 - t0) * plotW() / (st.view.t1 - st.view.t0) < 3) { st.range = null; draw(); return; }  // a shift-click
      st.range = { t0, t1, dragging: false }; st.selected = null; draw();
      TimelineRange.show(st.details, st.run, t0, t1, name => jumpTo({ name }));
      return;
    }
    if (!st || !st.drag) return;
    const moved = st.drag.moved; st.drag = null; st.canvas.style.cursor = "grab";
    if (moved) return;
    const rect = st.canvas.getBoundingClientRect();
    if (e.clientX < rect.left || e.clientY < rect.top || e.clientX > rect.right || e.clientY > rect.bottom) return;
    st.canvas.focus();
    const x = e.clientX - rect.left, y = e.clientY - rect.top;
    if (x < LABEL_W) {
      const tr = trackAt(y);
      if (tr && foldable(tr)) setFolded(tr, !st.collapsed.has(tr.id));
      return;
    }
    select(hitTest(x, y));
  }

  return { mount, unmount, get state() { return st; }, SOURCES };
})();

U.page("timeline", "Timeline", ctx => Timeline.mount(ctx.el, ctx.run, ctx.query));
