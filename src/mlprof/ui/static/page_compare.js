"use strict";
// Compare runs: this run (new) against a base run. States what each figure measures, shows where the
// change comes from as waterfalls (phases, op types, modules), then the ranked tables in one unit per table.
(() => {
  const { h, getJSON, card, fmtNs, sig } = U;

  function basePicker(ctx, base) {
    const others = ctx.runs.filter(r => r.id !== ctx.run && r.steps);
    const groups = new Map();
    for (const r of others) { if (!groups.has(r.folder)) groups.set(r.folder, []); groups.get(r.folder).push(r); }
    return h("select", { id: "compare-base", onchange: e => ctx.go({ base: e.target.value }) },
      h("option", { value: "" }, "choose the base run…"),
      [...groups].map(([folder, rs]) => h("optgroup", { label: folder || "(logdir)" }, rs.map(r => h("option", { value: r.id, selected: r.id === base },
        `${r.name}${r.rank !== null && r.rank !== undefined ? ` · rank ${r.rank}` : ""} · ${r.device} · ${fmtNs(r.mean_step_ns)}/step`)))));
  }

  const cls = d => d > 0 ? "delta-slower" : d < 0 ? "delta-faster" : "";

  // One unit for base, new and change of a table, chosen from its largest figure.
  function section(ctx, c, title, name, kind) {
    const rows = c[name].map(d => ({ ...d, ...(d.detail || {}), present_in: (d.detail || {}).present_in ?? ({ gone: "base", new: "new" }[d.presence] || d.presence) }));
    if (!rows.length) return card(title, `/api/compare/${name}`, ctx.params, h("p", { class: "muted" }, "nothing to compare"));
    const max = Math.max(...rows.flatMap(r => [Math.abs(r.base_ns), Math.abs(r.new_ns)]));
    const { div, unit } = U.scaleFor(max, kind);
    const digits = max / div >= 100 ? 1 : max / div >= 10 ? 2 : 3;
    const num = v => U.fixed(v, div, digits);
    const hostUnit = U.columnUnit(rows, "host_self_delta_ns", "ns");
    const cols = [{ key: "name", label: name === "ops" ? "op and input shapes" : "name" },
      ...(name === "breakdown" ? [{ key: "view", label: "view" }] : [{ key: "present_in", label: "in", title: "present in both runs, or in one only" }]),
      ...(rows.some(r => r.base_count !== undefined) ? [{ key: "base_count", label: "base calls", fmt: v => v === undefined ? "" : sig(v), num: true },
        { key: "new_count", label: "new calls", fmt: v => v === undefined ? "" : sig(v), num: true }] : []),
      { key: "base_ns", label: `base (${unit})`, fmt: num, num: true }, { key: "new_ns", label: `new (${unit})`, fmt: num, num: true },
      { key: "delta_ns", label: `change (${unit})`, num: true, fmt: v => h("span", { class: cls(v) }, (v > 0 ? "+" : "") + num(v)) },
      { key: "delta_pct", label: "change %", num: true, fmt: v => v === null || v === undefined ? "" : h("span", { class: cls(v) }, `${v > 0 ? "+" : ""}${v.toFixed(1)}`) },
      ...(kind === "ns" ? [{ key: "share_of_step_delta", label: "of step change (%)", kind: "share" }] : []),
      ...(rows.some(r => r.host_self_delta_ns !== undefined) ? [{ key: "host_self_delta_ns", label: `host self Δ (${hostUnit.unit})`, num: true, fmt: hostUnit.fmt }] : [])];
    const more = c.more[name] ? h("p", { class: "muted" }, `${c.more[name]} more row(s) with smaller changes are left out (the CLI's --json has them all).`) : null;
    return card(title, `/api/compare/${name}`, ctx.params, DataTable(rows, cols, { sortKey: null }), more);
  }

  async function comparePage(ctx) {
    const { run, el, query } = ctx;
    const base = query.base || "";
    U.fill(el, h("h1", {}, "Compare runs"),
      h("div", { class: "table-tools" }, h("label", {}, "base ", basePicker(ctx, base)), h("span", { class: "muted" }, ` → new: ${run}`)));
    if (!base) { U.append(el, h("p", { class: "muted" }, ctx.runs.length > 1 ? "Choose the run to compare this one against." : "Only one run under this logdir: nothing to compare with.")); return; }
    let c;
    try { c = await getJSON(`/api/compare?${U.query({ run, base })}`); }
    catch (e) { U.append(el, U.naBox(e.message, "compare-error")); return; }
    const st = c.step_time;
    ctx.params = { run, base };
    const sign = st.delta_ns > 0 ? "+" : "";
    U.append(el,
      card("Step time", "/api/compare/summary", ctx.params, h("div", { id: "compare-summary" },
        h("div", { class: "big-number " + cls(st.delta_ns) }, `${sign}${st.delta_pct === null ? "" : st.delta_pct.toFixed(1) + " %"}`),
        h("p", {}, `mean step ${fmtNs(st.base_ns)} → ${fmtNs(st.new_ns)} (${sign}${fmtNs(st.delta_ns)}) over ${c.steps} step(s) aligned by ${c.aligned_by}` +
          (c.speedup ? `; speedup ×${c.speedup.toFixed(3)}` : "")),
        c.verdict ? h("p", { id: "compare-verdict" }, `Verdict (medians, with a confidence interval): ${c.verdict.sentence}`) : null,
        h("p", { id: "compare-metric", class: "metric" }, h("b", {}, "Op and op-type rows measure: "), c.metric.label, ". ",
          h("b", {}, "Kernels: "), "device time per step. ", h("b", {}, "Breakdown: "), "the step's phases, per step."),
        (c.notes || []).map(n => h("p", { class: "muted" }, n)),
        (c.warnings || []).map(w => h("p", { class: "na-box compare-warning" }, `Warning: ${w}`)))),
      h("div", { id: "compare-waterfalls" }, c.waterfalls.map(w => card(`Where the change comes from: ${w.title}`, null, null,
        Charts.waterfall(w, { baseLabel: "base", newLabel: "new", yName: "time per step" })))),
      card("Aligned steps", "/api/compare/step_pairs", ctx.params, Charts.bars(c.step_pairs.map(p => ({ label: `#${p.new_step}`, base: p.base_ns, new: p.new_ns })),
        [{ key: "base", name: "base", color: "#8a94a6" }, { key: "new", name: "new", color: "#2f6fdd" }], { stack: false, xName: "step (new run)", yName: "step time" })),
      section(ctx, c, "Step breakdown (mean per step)", "breakdown", "ns"), section(ctx, c, "Op types", "op_types", "ns"),
      section(ctx, c, "Ops by input shape", "ops", "ns"), section(ctx, c, "Kernels (device time per step)", "kernels", "ns"),
      section(ctx, c, "Memory peaks", "memory", "bytes"));
  }

  U.page("compare", "Compare runs", comparePage);
})();
