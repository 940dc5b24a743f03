"use strict";
// A searchable, sortable table of dataset rows.
// columns: [{key, label, kind?: "ns"|"bytes"|"pct"|"share"|"count", fmt?, num?, wide?}]; a column with a
// kind shows every value in one unit, chosen from the column's largest value and named in its header.
// setRows() replaces the rows and keeps the filter, the sort and the selection (the run list refreshes this way).
// opts.selected marks the row whose rowKey it is; with opts.reveal the table scrolls it into view.
// opts.stateKey keeps the filter and the sort in the page's URL (Back and a reload keep them).
function DataTable(rows, allColumns, opts = {}) {
  let columns = allColumns;
  const limit = opts.limit || 1000;
  // opts.stateKey: the table's filter and sort live in the page's URL as <key>_filter and <key>_sort.
  const kept = opts.stateKey ? U.hashParams() : {};
  const keptSort = kept[`${opts.stateKey}_sort`];
  if (keptSort && allColumns.some(c => c.key === keptSort.replace(/^-/, ""))) {
    opts = { ...opts, sortKey: keptSort.replace(/^-/, ""), sortDir: keptSort.startsWith("-") ? -1 : 1 };
  }
  if (kept[`${opts.stateKey}_filter`] !== undefined) opts = { ...opts, filter: kept[`${opts.stateKey}_filter`] };
  const remember = () => {
    if (opts.stateKey) U.setHashParams({ [`${opts.stateKey}_filter`]: search.value, [`${opts.stateKey}_sort`]: sortKey ? `${sortDir < 0 ? "-" : ""}${sortKey}` : null });
  };
  let sortKey = opts.sortKey || null, sortDir = opts.sortDir || -1, filter = (opts.filter || "").toLowerCase();
  let selectedKey = opts.selected ?? null;
  let total = opts.total ?? rows.length;
  const tbody = U.h("tbody"), headRow = U.h("tr");
  const info = U.h("span", { class: "muted table-info" });
  const search = U.h("input", { type: "search", placeholder: "filter…", "aria-label": "filter rows", value: opts.filter || null,
    oninput: e => { filter = e.target.value.toLowerCase(); render(); remember(); } });
  const table = U.h("table", { class: "data" }, U.h("thead", {}, headRow), tbody);
  const keyOf = opts.rowKey || (r => JSON.stringify(r));
  const isNum = c => c.num || ["ns", "bytes", "bytes_per_s", "pct", "share", "count"].includes(c.kind);
  function formatters() {
    return columns.map(c => {
      if (c.fmt) return { label: c.label, fmt: c.fmt };
      if (c.kind === "ns" || c.kind === "bytes" || c.kind === "bytes_per_s") {
        const u = U.columnUnit(rows, c.key, c.kind);
        return { label: `${c.label} (${u.unit})`, fmt: u.fmt };
      }
      if (c.kind === "pct") return { label: c.label, fmt: v => v === null || v === undefined ? "" : v.toFixed(1) };
      if (c.kind === "share") return { label: c.label, fmt: v => v === null || v === undefined ? "" : (100 * v).toFixed(1) };
      if (c.kind === "count") return { label: c.label, fmt: U.fmtNum };
      return { label: c.label, fmt: null };
    });
  }
  function render() {
    // A unit column with no value at all (device idle on a CPU run) says nothing: it is left out.
    columns = allColumns.filter(c => !(c.kind && c.kind !== "count" && rows.length && rows.every(r => r[c.key] === null || r[c.key] === undefined)));
    const fm = formatters();
    headRow.replaceChildren(...columns.map((c, i) => U.h("th", {
      class: (isNum(c) ? "num " : "") + (c.key === sortKey ? (sortDir > 0 ? "sorted-asc" : "sorted-desc") : ""),
      "data-key": c.key, title: c.title || null,
      onclick: () => { sortDir = sortKey === c.key ? -sortDir : (isNum(c) ? -1 : 1); sortKey = c.key; render(); remember(); } }, fm[i].label)));
    let shown = rows;
    if (filter) shown = rows.filter(r => columns.some(c => String(r[c.key] ?? "").toLowerCase().includes(filter)));
    if (sortKey) {
      shown = shown.slice().sort((a, b) => {
        const x = a[sortKey], y = b[sortKey];
        if (x === y) return 0;
        if (x === null || x === undefined) return 1;
        if (y === null || y === undefined) return -1;
        return (typeof x === "number" && typeof y === "number" ? x - y : String(x).localeCompare(String(y))) * sortDir;
      });
    }
    tbody.replaceChildren(...shown.slice(0, limit).map(r => {
      const tr = U.h("tr", { class: (opts.onRowClick ? "clickable" : "") + (selectedKey !== null && keyOf(r) === selectedKey ? " selected" : "") },
        columns.map((c, i) => U.h("td", { class: (isNum(c) ? "num" : "") + (c.key === "name" || c.wide ? " name" : ""),
          title: isNum(c) ? null : String(r[c.key] ?? "") }, fm[i].fmt ? fm[i].fmt(r[c.key], r) : (r[c.key] ?? ""))));
      if (opts.onRowClick) tr.addEventListener("click", e => {
        if (e.target.closest("a")) return;  // a link in the row goes where it says
        tbody.querySelectorAll("tr.selected").forEach(x => x.classList.remove("selected"));
        selectedKey = keyOf(r); tr.classList.add("selected"); opts.onRowClick(r);
      });
      return tr;
    }));
    const parts = [`${Math.min(limit, shown.length).toLocaleString("en-US")} of ${shown.length.toLocaleString("en-US")} rows`];
    if (shown.length !== rows.length) parts.push(`(filtered from ${rows.length.toLocaleString("en-US")})`);
    if (shown.length > limit) parts.push(`— the first ${limit.toLocaleString("en-US")} are shown; filter or sort to see others, or download all`);
    if (total > rows.length) parts.push(`— the server sent the first ${rows.length.toLocaleString("en-US")} of ${total.toLocaleString("en-US")}` +
      (opts.cutBy ? ` (${opts.cutBy})` : "") + "; the download holds the same rows");
    info.textContent = parts.join(" ");
  }
  render();
  const el = U.h("div", { class: "data-table" }, U.h("div", { class: "table-tools" }, search, info),
    U.h("div", { class: "table-wrap" }, table));
  // A row asked for by a link (an advisor finding's op, call site or module) is shown, not only marked.
  if (selectedKey !== null && opts.reveal) requestAnimationFrame(() => {
    const row = tbody.querySelector("tr.selected");
    if (row) row.scrollIntoView({ block: "center" });
  });
  el.setRows = (next, nextTotal) => { rows = next; total = nextTotal ?? next.length; render(); };
  return el;
}
