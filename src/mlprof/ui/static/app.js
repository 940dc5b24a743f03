"use strict";
// Router (#/ and #/run/<id>/<page>?step=N&...), the header's run / rank / step switchers and the menu.
// The step chosen in the header is in every link, so every page follows it.
(() => {
  const { h, getJSON } = U;
  const main = document.getElementById("main"), nav = document.getElementById("nav");
  const switchers = document.getElementById("switchers");
  let renderToken = 0, runsCache = null;

  function parseHash() {
    const [path, q] = location.hash.replace(/^#/, "").split("?");
    const parts = path.split("/").filter(Boolean);
    const query = Object.fromEntries(new URLSearchParams(q || ""));
    if (parts[0] === "run" && parts[1]) return { run: decodeURIComponent(parts[1]), page: parts[2] || "overview", query };
    return { run: null, query };
  }

  async function runs() {
    if (!runsCache) runsCache = getJSON("/api/runs").catch(e => { runsCache = null; throw e; });
    return runsCache;
  }

  function header(run, page, query, f, list) {
    const keep = query.step ? { step: query.step } : {};
    // Runs grouped by the folder they sit in (a job's ranks side by side).
    const groups = new Map();
    for (const r of list.runs) { if (!groups.has(r.folder)) groups.set(r.folder, []); groups.get(r.folder).push(r); }
    const runSel = h("select", { id: "run-switch", "aria-label": "run", onchange: e => { location.hash = U.runHref(e.target.value, page); } },
      [...groups].map(([folder, rs]) => h("optgroup", { label: folder || "(logdir)" }, rs.map(r => h("option", {
        value: r.id, selected: r.id === run }, `${r.name.split("/").pop()}${r.rank !== null && r.rank !== undefined ? ` · rank ${r.rank}` : ""} · ${r.device}`)))));
    // A job's ranks as links; past 16 (a job of 1,024 ranks) as one picker.
    const ranks = !f.ranks.length ? null : f.ranks.length <= 16 ? h("span", { id: "rank-switch", class: "switch" }, "rank ",
      f.ranks.map(x => h("a", { href: U.runHref(x.id, page, keep), class: x.id === run ? "on" : null, "data-rank": x.rank }, String(x.rank))))
      : h("label", { id: "rank-switch", class: "switch" }, `rank (of ${f.ranks.length}) `, h("select", { id: "rank-select", "aria-label": "rank",
        onchange: e => { location.hash = U.runHref(e.target.value, page, keep); } },
        f.ranks.map(x => h("option", { value: x.id, selected: x.id === run, "data-rank": x.rank }, String(x.rank)))));
    const steps = f.summary.step_numbers || [];
    const stepSel = steps.length ? h("label", { class: "switch" }, "step ", h("select", { id: "step-switch", "aria-label": "step",
      onchange: e => { location.hash = U.runHref(run, page, { ...U.hashParams(), step: e.target.value }); } },
      h("option", { value: "" }, `all ${steps.length}`), steps.map(s => h("option", { value: s, selected: String(s) === String(query.step) }, `#${s}`)))) : null;
    U.fill(switchers, runSel, ranks, stepSel);
  }

  function menu(run, page, query, features) {
    const keep = query.step ? { step: query.step } : {};
    U.fill(nav, U.pageList().map(p => {
      const f = features[p.key] || { available: true };
      return h("a", { href: U.runHref(run, p.key, keep), "data-page": p.key, title: f.available ? null : f.reason,
        class: (p.key === page ? "active " : "") + (f.available ? "" : "na") }, p.label);
    }));
  }

  async function route() {
    Charts.disposeAll();
    if (window.Timeline) Timeline.unmount();
    if (window.RunList) RunList.stop();
    const token = ++renderToken;
    const { run, page, query } = parseHash();
    if (!run) { nav.hidden = true; switchers.replaceChildren(); runsCache = null; return RunList.show(main); }
    nav.hidden = false;
    // Long work says how long it has run: analyses of a large run take seconds the first time (their answers
    // are kept on disk for the next open).
    const loading = h("p", { id: "loading" }, "Loading…"), t0 = Date.now();
    main.replaceChildren(loading);
    const ticker = setInterval(() => {
      if (token !== renderToken || !loading.isConnected) { clearInterval(ticker); return; }
      const s = Math.round((Date.now() - t0) / 1000);
      loading.textContent = `Loading… ${s} s` + (s >= 3 ? " (a run's analyses run on its first open and are kept for the next)" : "");
    }, 1000);
    let f, list;
    try { [f, list] = await Promise.all([getJSON(`/api/features?${U.query({ run })}`), runs()]); }
    catch (e) { if (token === renderToken) U.fill(main, h("h1", {}, "Run"), U.naBox(`Could not load this run: ${e.message}`)); return; }
    if (token !== renderToken) return;
    const entry = U.pageList().find(p => p.key === page) || U.pageList()[0];
    header(run, entry.key, query, f, list);
    menu(run, entry.key, query, f.features);
    const el = h("div", { id: `page-${entry.key}`, class: "page" });
    const feature = f.features[entry.key] || { available: true };
    const go = (extra, to) => {
      // The URL's query now: a table's filter and sort, an op drilled into, kept since the page drew.
      const q = { ...U.hashParams(), ...extra };
      for (const k of Object.keys(q)) if (q[k] === null || q[k] === undefined || q[k] === "") delete q[k];
      location.hash = U.runHref(run, to || entry.key, q);
    };
    const step = query.step === undefined || query.step === "" ? null : query.step;
    try {
      if (!feature.available) U.fill(el, h("h1", {}, entry.label), U.naBox(`Nothing to show for this run: ${feature.reason}.`, "page-na"));
      else await entry.render({ run, el, step, query, go, features: f.features, summary: f.summary, ranks: f.ranks, phases: f.phases, runs: list.runs });
      if (token === renderToken) main.replaceChildren(el);
    } catch (e) {
      if (token === renderToken) U.fill(main, h("h1", {}, entry.label), U.naBox(`Could not load: ${e.message}`));
    }
  }
  window.addEventListener("hashchange", route);
  route();
})();
