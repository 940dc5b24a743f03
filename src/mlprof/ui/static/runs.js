"use strict";
// The run list: every parsed run with its job, rank, device and step time; refreshed every 5 s
// in place, so a filter or a sort the user chose stays.
const RunList = (() => {
  const { h, getJSON } = U;
  let timer = null, current = null;

  function rowsOf(r) {
    return r.runs.map(x => ({ ...x, parsed: new Date(x.parsed_mtime_ns / 1e6).toISOString().slice(0, 19).replace("T", " "),
      job_label: x.job || "", rank_label: x.rank === null || x.rank === undefined ? "" : x.world_size ? `${x.rank} of ${x.world_size}` : String(x.rank) }));
  }

  async function show(main) {
    stop();
    const status = document.getElementById("status");
    const tableBox = h("div", { id: "runs" }, h("p", {}, "Loading runs…")), unparsed = h("div"), note = h("div");
    U.fill(main, h("h1", {}, "Runs"), tableBox, unparsed, note);
    let table = null;
    const columns = [
      { key: "name", label: "run", fmt: (v, row) => h("a", { href: U.runHref(row.id, "overview"), class: "run-link" }, v) },
      { key: "job_label", label: "job" }, { key: "rank_label", label: "rank" }, { key: "device", label: "device" },
      { key: "steps", label: "steps", kind: "count" }, { key: "mean_step_ns", label: "mean step", kind: "ns" },
      { key: "median_step_ns", label: "median step", kind: "ns" },
      { key: "event_count", label: "events", kind: "count" }, { key: "kind", label: "kind" },
      { key: "parsed", label: "parsed (UTC)" }];
    const refresh = async () => {
      try {
        const r = await getJSON("/api/runs");
        status.textContent = `${r.runs.length} run(s) under ${r.logdir}`;
        if (!r.runs.length) U.fill(tableBox, U.naBox("No parsed runs yet under this directory. Profile a job or run `mlprof parse DIR`; this list refreshes by itself."));
        else if (!table) { table = DataTable(rowsOf(r), columns, { sortKey: "name", sortDir: 1, rowKey: x => x.id }); U.fill(tableBox, table); }
        else table.setRows(rowsOf(r));
        U.fill(unparsed, r.unparsed.length ? h("div", { class: "card", id: "unparsed" }, h("h2", {}, "Not parsed yet"),
          h("p", { class: "muted" }, "The dashboard is read-only; parse these with `mlprof parse PATH`."),
          h("ul", {}, r.unparsed.map(u => h("li", {}, `${u.path} (${u.kind})`)))) : null);
        U.fill(note, r.truncated ? h("p", { class: "muted" }, "The directory is large; only part of it was searched.") : null);
      } catch (e) { status.textContent = `error: ${e.message}`; }
    };
    current = refresh;
    await refresh();
    timer = setInterval(refresh, 5000);
  }
  function stop() { if (timer) { clearInterval(timer); timer = null; } current = null; }
  // The 5 s refresh, now (tests; a person just waits).
  function refreshNow() { return current ? current() : null; }
  return { show, stop, refreshNow };
})();
