"use strict";
// The details of one timeline slice: its fields in words and units, links that jump to the related
// slices (parent op, kernels it launched, launching op and runtime call), and the raw table row folded away.
const TimelineDetails = (() => {
  const { h, fmtNs, fmtBytes, fmtTime, fmtNum } = U;
  const FORMAT = { time: fmtTime, ns: fmtNs, bytes: fmtBytes, pct: v => `${U.sig(v)} %`, count: fmtNum, text: v => String(v) };

  function render(ev, run, jump) {
    const fields = h("table", { class: "data kv-table", id: "tl-event-table" }, h("tbody", {}, ev.fields.map(f =>
      h("tr", {}, h("th", {}, f.label), h("td", { class: "name" }, (FORMAT[f.kind] || FORMAT.text)(f.value))))));
    const links = Object.entries(ev.links).map(([label, items]) => h("div", { class: "tl-links" }, h("b", {}, `${label}: `),
      items.map((x, i) => [i ? ", " : "", h("a", { href: U.timelineHref(run, { src: x.src, id: x.id }), class: "tl-jump",
        "data-src": x.src, "data-id": x.id, onclick: e => { e.preventDefault(); jump({ src: x.src, id: x.id }); } },
      x.name), x.dur_ns !== undefined && x.dur_ns !== null ? h("span", { class: "muted" }, ` (${fmtNs(x.dur_ns)})`) : null]),
      items.length >= 50 ? h("span", { class: "muted" }, " (first 50)") : null));
    const raw = h("details", { class: "raw-row" }, h("summary", {}, `the ${ev.table} row as stored`),
      h("pre", {}, JSON.stringify(ev.row, null, 1)));
    const more = ev.table === "host_ops" ? h("p", {}, h("a", { href: U.runHref(run, "operators", { op: ev.name }) }, "this op in the operator table")) :
      ev.table === "device_ops" ? h("p", {}, h("a", { href: U.runHref(run, "kernels", { kernel: ev.name }) }, "this kernel in the kernel table")) :
      ev.table === "steps" ? h("p", {}, h("a", { href: U.runHref(run, "step_trace", { step: ev.row.step }) }, "this step's breakdown")) : null;
    return [fields, ...links, more, raw];
  }
  return { render };
})();
