"use strict";
// A searchable, sortable table of dataset rows. columns: [{key, label, fmt?, num?}]
function DataTable(rows, columns, opts = {}) {
  const limit = opts.limit || 1000;
  let sortKey = opts.sortKey || null, sortDir = opts.sortDir || -1, filter = "";
  let selected = null;
  const tbody = U.h("tbody");
  const info = U.h("span", { class: "muted table-info" });
  const search = U.h("input", { type: "search", placeholder: "filter…", "aria-label": "filter rows",
    oninput: e => { filter = e.target.value.toLowerCase(); render(); } });
  const heads = columns.map(c => U.h("th", { class: c.num ? "num" : "", "data-key": c.key,
    onclick: () => { sortDir = sortKey === c.key ? -sortDir : (c.num ? -1 : 1); sortKey = c.key; render(); } }, c.label));
  const table = U.h("table", { class: "data" }, U.h("thead", {}, U.h("tr", {}, heads)), tbody);
  function render() {
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
    heads.forEach((th, i) => th.className = (columns[i].num ? "num " : "") +
      (columns[i].key === sortKey ? (sortDir > 0 ? "sorted-asc" : "sorted-desc") : ""));
    tbody.replaceChildren(...shown.slice(0, limit).map(r => {
      const tr = U.h("tr", { class: opts.onRowClick ? "clickable" : "" },
        columns.map(c => U.h("td", { class: (c.num ? "num" : "") + (c.key === "name" || c.wide ? " name" : ""),
          title: c.num ? null : String(r[c.key] ?? "") }, c.fmt ? c.fmt(r[c.key], r) : (r[c.key] ?? ""))));
      if (opts.onRowClick) tr.addEventListener("click", () => {
        if (selected) selected.classList.remove("selected");
        selected = tr; tr.classList.add("selected"); opts.onRowClick(r);
      });
      return tr;
    }));
    info.textContent = `${Math.min(limit, shown.length)} of ${shown.length} rows` + (shown.length !== rows.length ? ` (filtered from ${rows.length})` : "");
  }
  render();
  return U.h("div", { class: "data-table" }, U.h("div", { class: "table-tools" }, search, info),
    U.h("div", { class: "table-wrap" }, table));
}
