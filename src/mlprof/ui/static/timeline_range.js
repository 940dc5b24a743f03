"use strict";
// Two readings of the timeline that are not one slice: the colour legend (which names fill the view) and
// the statistics of a selected time range (Shift+drag), as /api/timeline/range answers them exactly.
const TimelineRange = (() => {
  const { h, fmtNs, fmtTime, colorOf } = U;
  const LEGEND_MAX = 10;

  // The names that fill the most of the view, longest first, with the colour each is drawn in. A slice's
  // share is its visible part; a merged block counts its busy time for the name it is drawn under.
  function legend(answer, view, onPick) {
    if (!answer) return [];
    const s = answer.slices, byName = new Map();
    for (let i = 0; i < s.track.length; i++) {
      const start = answer.t0 + s.start[i];
      const visible = Math.max(0, Math.min(start + s.dur[i], view.t1) - Math.max(start, view.t0));
      const t = s.count[i] > 1 ? Math.min(s.busy[i], visible) : visible;
      if (t > 0) byName.set(s.name[i], (byName.get(s.name[i]) || 0) + t);
    }
    const top = [...byName].sort((a, b) => b[1] - a[1] || (answer.names[a[0]] < answer.names[b[0]] ? -1 : 1)).slice(0, LEGEND_MAX);
    const items = top.map(([k, t]) => {
      const name = answer.names[k];
      return h("button", { class: "tl-legend-item", title: `${name}: ${fmtNs(t)} in view; click for its longest slice`, "data-name": name,
        onclick: () => onPick(name) }, h("span", { class: "swatch", style: `background:${colorOf(name)}` }), U.shorten(name, 40));
    });
    if (items.length) items.push(h("span", { class: "muted tl-legend-note" }, "each name has its colour; a lighter shade is several short slices merged at this zoom"));
    return items;
  }

  // The statistics of [t0, t1) (relative ns), rendered into ``el``; ``jump`` opens a name's longest slice.
  async function show(el, run, t0, t1, jump) {
    const head = h("h2", {}, `Range ${fmtTime(t0)} – ${fmtTime(t1)} (${fmtNs(t1 - t0)})`);
    const key = `${Math.round(t0)}-${Math.round(t1)}`;
    el.replaceChildren(head, h("p", { class: "muted" }, "loading…"));
    delete el.dataset.range;
    el.dataset.pending = key;
    try {
      const r = await U.getJSON(`/api/timeline/range?${U.query({ run, t0: Math.round(t0), t1: Math.round(t1) })}`);
      if (el.dataset.pending !== key) return;  // another range or a slice was chosen meanwhile
      const kinds = h("p", { id: "tl-range-kinds" }, r.kinds.length ? r.kinds.map((k, i) => [i ? " · " : "",
        h("b", {}, k.kind), ` ${k.count.toLocaleString("en-US")} slices, ${fmtNs(k.in_range_ns)}`]) : "Nothing in this range.");
      const rows = r.rows.map(x => ({ ...x, share: x.in_range_ns / r.span_ns }));
      const table = DataTable(rows, [
        { key: "name", label: "name", fmt: x => h("a", { href: "#", onclick: e => { e.preventDefault(); jump(x); } }, x), wide: true },
        { key: "kind", label: "kind" },
        { key: "count", label: "slices", kind: "count" },
        { key: "in_range_ns", label: "time in range", kind: "ns" },
        { key: "share", label: "of the range (%)", kind: "share" },
        { key: "longest_ns", label: "longest", kind: "ns" },
      ], { sortKey: "in_range_ns", rowKey: x => `${x.name}\u0000${x.kind}` });
      el.replaceChildren(head, kinds, table, h("p", { class: "muted" },
        `Each slice counts its part inside the range; nested slices each count their own time, so a column can sum past the range.` +
        (r.truncated ? ` The ${r.rows.length} names with the most time of ${r.names} are listed.` : "")));
      el.dataset.range = key;
    } catch (e) { if (el.dataset.pending === key) el.replaceChildren(head, h("p", { class: "na-box" }, e.message)); }
  }

  return { legend, show };
})();
