"use strict";
// Router (#/ and #/run/<id>/<page>?k=v), navigation, and the run list (polled).
(() => {
  const { h, getJSON } = U;
  const main = document.getElementById("main"), nav = document.getElementById("nav");
  const status = document.getElementById("status"), runTitle = document.getElementById("run-title");
  let pollTimer = null, renderToken = 0;

  function parseHash() {
    const [path, q] = location.hash.replace(/^#/, "").split("?");
    const parts = path.split("/").filter(Boolean);
    const query = Object.fromEntries(new URLSearchParams(q || ""));
    if (parts[0] === "run" && parts[1]) return { run: decodeURIComponent(parts[1]), page: parts[2] || "overview", query };
    return { run: null, query };
  }

  async function runList() {
    nav.hidden = true; runTitle.textContent = "";
    const body = h("div", { id: "runs" }, h("p", {}, "Loading runs…"));
    main.replaceChildren(h("h1", {}, "Runs"), body);
    const refresh = async () => {
      try {
        const r = await getJSON("/api/runs");
        status.textContent = `${r.runs.length} run(s) under ${r.logdir}`;
        body.replaceChildren(
          r.runs.length ? DataTable(r.runs.map(x => ({ ...x, parsed: new Date(x.parsed_mtime_ns / 1e6).toISOString().slice(0, 19).replace("T", " ") })),
            [{ key: "name", label: "run", fmt: (v, row) => h("a", { href: `#/run/${encodeURIComponent(row.id)}/overview`, class: "run-link" }, v) },
              { key: "kind", label: "kind" }, { key: "event_count", label: "events", num: true, fmt: U.fmtNum },
              { key: "parsed", label: "parsed (UTC)" }, { key: "id", label: "path", wide: true }], { sortKey: "name", sortDir: 1 })
            : h("p", { class: "na-box" }, "No parsed runs yet under this directory. Profile a job or run `mlprof parse DIR`; this list refreshes by itself."),
          r.unparsed.length ? h("div", { class: "card" }, h("h2", {}, "Not parsed yet"),
            h("p", { class: "muted" }, "The dashboard is read-only; parse these with `mlprof parse PATH`."),
            h("ul", {}, r.unparsed.map(u => h("li", {}, `${u.path} (${u.kind})`)))) : null,
          r.truncated ? h("p", { class: "muted" }, "The directory is large; only part of it was searched.") : null);
      } catch (e) { status.textContent = `error: ${e.message}`; }
    };
    await refresh();
    pollTimer = setInterval(refresh, 5000);
  }

  async function route() {
    if (pollTimer) { clearInterval(pollTimer); pollTimer = null; }
    if (window.Timeline) Timeline.unmount();
    const token = ++renderToken;
    const { run, page, query } = parseHash();
    if (!run) return runList();
    nav.hidden = false;
    runTitle.textContent = run;
    nav.replaceChildren(...Pages.list.map(([key, label]) => h("a", {
      href: `#/run/${encodeURIComponent(run)}/${key}`, class: (key === page ? "active " : "") + (Pages.unavailable.has(key) ? "na" : ""),
      "data-page": key }, label)));
    const entry = Pages.list.find(([key]) => key === page) || Pages.list[0];
    main.replaceChildren(h("p", {}, "Loading…"));
    const el = h("div", { id: `page-${entry[0]}`, class: "page" });
    const go = extra => { const q = new URLSearchParams({ ...query, ...extra }); for (const [k, v] of [...q]) if (!v) q.delete(k);
      location.hash = `#/run/${encodeURIComponent(run)}/${entry[0]}${q.toString() ? "?" + q : ""}`; };
    try {
      await entry[2]({ run, el, step: query.step || null, query, go });
      if (token === renderToken) main.replaceChildren(el);
    } catch (e) {
      if (token === renderToken) main.replaceChildren(h("h1", {}, entry[1]), h("p", { class: "na-box error" }, `Could not load: ${e.message}`));
    }
  }
  window.addEventListener("hashchange", route);
  route();
})();
