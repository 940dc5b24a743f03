"use strict";
// Where the time is in the user's model and code: the nn.Module tree (treemap and table) and the
// Python call sites of each phase (from the stack sampler), both following the header's step.
(() => {
  const { h, getRows, dataUrl, card, fmtNs, fmtShare } = U;
  const load = (name, run, extra) => getRows(dataUrl(name, { run, ...extra })).then(x => x.rows);
  const METRICS = [["fwd_bwd", "forward + backward host time", m => [m.total_ns + m.backward_total_ns, m.self_ns + m.backward_self_ns]],
    ["forward", "forward host time", m => [m.total_ns, m.self_ns]], ["backward", "backward host time", m => [m.backward_total_ns, m.backward_self_ns]],
    ["device", "device time of the kernels launched in forward", m => [m.device_total_ns, m.device_self_ns]]];

  // Paths "Net.layers.0" nest by their dots; each node's own (self) time is a "(self)" leaf so areas add up.
  function tree(mods, metric) {
    // A container's children are named by their index ("0", "3"): the label adds the type ("0 Linear").
    const label = m => { const last = m.path.split(".").pop(); return /^\d+$/.test(last) ? `${last} ${m.module_type}` : last; };
    const byPath = new Map(mods.map(m => [m.path, { name: label(m), path: m.path, children: [], m }]));
    const roots = [];
    for (const m of mods) {
      const node = byPath.get(m.path), parts = m.path.split(".");
      let parent = null;
      for (let i = parts.length - 1; i > 0 && !parent; i--) parent = byPath.get(parts.slice(0, i).join("."));
      (parent ? parent.children : roots).push(node);
    }
    const finish = node => {
      const [total, self] = metric(node.m);
      const kids = node.children.map(finish).filter(k => k.value > 0);
      if (kids.length && self > 0) kids.push({ name: "(self)", path: `${node.path} (self)`, value: self, note: `${node.m.module_type}: time outside child modules` });
      return { name: node.name, path: node.path, value: Math.max(total, 0), note: `${node.m.module_type}, ${+node.m.calls.toFixed(2)} call(s) per step`,
        children: kids.length ? kids : undefined };
    };
    return roots.map(finish).filter(n => n.value > 0);
  }

  async function modules(ctx) {
    const { run, el, step, query } = ctx;
    // Per step, as `mlprof modules` prints them: the dataset's sums over its rows' `steps`.
    const raw = await load("modules", run, { step });
    const n = (raw[0] && raw[0].steps) || 1;
    const mods = raw.map(m => ({ ...m, calls: m.calls / n, ...Object.fromEntries(Object.entries(m)
      .filter(([k, v]) => k.endsWith("_ns") && k !== "first_start_ns" && typeof v === "number").map(([k, v]) => [k, v / n])) }));
    const device = mods.some(m => m.device_total_ns > 0);
    const metrics = METRICS.filter(([k]) => k !== "device" || device);
    const metric = metrics.find(([k]) => k === query.metric) || metrics[0];
    const rows = mods.map(m => ({ ...m, label: "\u2003".repeat(m.depth) + m.path.split(".").pop(), fwd_bwd_ns: m.total_ns + m.backward_total_ns }));
    const focus = query.path || null;
    U.fill(el, h("h1", {}, "Modules", step !== null ? h("span", { class: "muted" }, ` · step ${step}`) : null),
      h("div", { class: "table-tools" }, h("label", {}, "area by ", h("select", { id: "module-metric", onchange: e => ctx.go({ metric: e.target.value }) },
        metrics.map(([k, label]) => h("option", { value: k, selected: k === metric[0] }, label)))),
        h("span", { class: "muted" }, "Forward time from mlprof's module hooks; backward is the autograd nodes each module's forward created.")),
      card(`nn.Module tree by ${metric[1]} per step (click to zoom in)`, "modules", { run, step },
        Charts.treemap(tree(mods, metric[2]))),
      card(`Modules (tree order), per step${n > 1 ? ` (mean over ${n} steps)` : ""}`, "modules", { run, step }, DataTable(rows, [
        { key: "label", label: "module", wide: true, fmt: (v, r) => h("span", { title: r.path, class: r.path === focus ? "focus" : null }, v) },
        { key: "module_type", label: "type" }, { key: "calls", label: "calls / step", num: true, fmt: v => U.fmtNum(+v.toFixed(2)) },
        { key: "total_ns", label: "forward total", kind: "ns" }, { key: "self_ns", label: "forward self", kind: "ns" },
        { key: "backward_total_ns", label: "backward total", kind: "ns" }, { key: "backward_self_ns", label: "backward self", kind: "ns" },
        ...(device ? [{ key: "device_total_ns", label: "device total", kind: "ns" }, { key: "device_self_ns", label: "device self", kind: "ns" }] : [])],
        { rowKey: r => r.path, selected: focus, reveal: true, stateKey: "modules" })));
  }

  async function callSites(ctx) {
    const { run, el, step, query } = ctx;
    const rows = await load("call_sites", run, { step, phase: query.phase });
    const phases = [...new Set(rows.map(r => r.phase))];
    const phaseColor = p => U.conceptColor(p);
    const top = rows.slice(0, 20);
    // The folder every call site shares (the user's project) is said once, not on every bar.
    const dirs = rows.map(r => (r.call_site || "").replace(/[^/]*$/, ""));
    let common = dirs[0] || "";
    for (const d of dirs) while (common && !d.startsWith(common)) common = common.replace(/[^/]*\/$/, "");
    const site = s => (common && s.startsWith(common) ? s.slice(common.length) : s);
    U.fill(el, h("h1", {}, "Call sites", step !== null ? h("span", { class: "muted" }, ` · step ${step}`) : null),
      h("div", { class: "table-tools" }, h("label", {}, "phase ", h("select", { id: "callsite-phase", onchange: e => ctx.go({ phase: e.target.value }) },
        h("option", { value: "" }, "all"), ctx.phases.host.map(([, label, key]) => h("option", { value: key, selected: key === query.phase }, label)))),
        h("span", { class: "muted" }, "The innermost line of your code on each sampled stack; a phase's time is shared among its lines by their samples.")),
      rows.length ? card(`Top ${top.length} lines of your code by estimated time${common ? ` (in ${common})` : ""}`, "call_sites", { run, step, phase: query.phase },
        Charts.hbars(top.map(r => ({ name: `${site(r.call_site)} [${r.phase}]`, value: r.est_ns, color: phaseColor(r.phase),
          note: `${r.samples} samples, ${fmtShare(r.share_of_phase)} of ${r.phase}; innermost frame ${r.leaf}` })), { xName: "estimated time", labelChars: 64 }),
        h("div", { class: "legend" }, phases.map(p => h("span", { style: `--c:${phaseColor(p)}` }, p)))) : null,
      card("Call sites", "call_sites", { run, step, phase: query.phase }, rows.length ? DataTable(rows, [
        { key: "phase", label: "phase" }, { key: "call_site", label: "call site", wide: true }, { key: "samples", label: "samples", kind: "count" },
        { key: "est_ns", label: "estimated time", kind: "ns" }, { key: "share_of_phase", label: "of phase (%)", kind: "share" },
        { key: "share_of_steps", label: "of step time (%)", kind: "share" }, { key: "leaf", label: "innermost frame (any code)", wide: true }],
        { sortKey: "est_ns", filter: query.site || "", rowKey: r => r.call_site, selected: query.site || null, reveal: true, stateKey: "sites" })
        : U.naBox("No samples in this phase.")));
  }

  U.page("modules", "Modules", modules);
  U.page("callsites", "Call sites", callSites);
})();
