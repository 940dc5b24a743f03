"use strict";
// Step trace (per-step device and host views; a bar opens that step on the timeline, a row picks the step
// for every page) and data loading. Phase names and labels come from the API (mlprof.tables.phases).
(() => {
  const { h, getRows, dataUrl, card, fmtNs, fmtShare } = U;
  const load = (name, run, extra) => getRows(dataUrl(name, { run, ...extra })).then(x => x.rows);
  const series = defs => defs.map(([key, name, concept]) => ({ key, name, color: U.conceptColor(concept || key) }));

  async function stepTrace(ctx) {
    const { run, el, step } = ctx;
    const steps = await load("steps", run, {});
    const P = ctx.phases, device = steps.some(r => r.computing_ns !== null && r.computing_ns !== undefined);
    const rows = steps.map(r => ({ ...r, label: `#${r.step}` }));
    const toTimeline = r => { location.hash = U.timelineHref(run, { step: r.step }); };
    const chosen = step === null ? null : steps.find(r => String(r.step) === String(step));
    // Short headers (the charts' legends say them in full); device and host communication are told apart.
    const short = l => l.split(" (")[0].replace("communication not overlapped", "comm. not overlapped");
    const cols = [{ key: "step", label: "step", num: true }, { key: "dur_ns", label: "step", kind: "ns" },
      ...(device ? [...P.device, ["communication_ns", "device comm."], ["overlapped_ns", "comm. overlapped"]] : [])
        .map(([k, l]) => ({ key: k, label: short(l), title: l, kind: "ns" })),
      ...P.host.map(([k, l]) => ({ key: k, label: k === "host_communication_ns" ? "host comm." : short(l), title: l, kind: "ns" })),
      { key: "open", label: "", fmt: (v, r) => h("a", { href: U.timelineHref(run, { step: r.step }), class: "tl-link" }, "timeline") }];
    U.fill(el, h("h1", {}, "Step trace"),
      h("p", { class: "muted" }, "Click a bar to open that step on the timeline; click a row (or use the header's step picker) to follow one step on every page."),
      chosen ? stepDetail(ctx, chosen, P, device) : null,
      device ? card("Device view per step: busy, or idle and why", "steps", { run },
        Charts.bars(rows, series(P.device), { xName: "step", yName: "step time", onClick: toTimeline })) : null,
      device ? card("Device idle per step, by what the host was doing", "steps", { run },
        Charts.bars(rows, series(P.idle), { xName: "step", yName: "device idle", onClick: toTimeline })) : null,
      card("Host view per step: the step thread's phases", "steps", { run },
        Charts.bars(rows, series(P.host), { xName: "step", yName: "step time", onClick: toTimeline })),
      card("Steps", "steps", { run }, DataTable(steps, cols, { sortKey: "step", sortDir: 1, rowKey: r => r.step, stateKey: "steps",
        onRowClick: r => ctx.go({ step: r.step }) })));
  }

  function stepDetail(ctx, r, P, device) {
    const items = defs => defs.map(([k, l, concept]) => ({ name: l, value: r[k] || 0, color: U.conceptColor(concept || k) })).filter(x => x.value > 0);
    return card(`Step ${r.step}: ${fmtNs(r.dur_ns)}`, "steps", { run: ctx.run, step: r.step },
      h("p", {}, h("a", { href: U.timelineHref(ctx.run, { step: r.step }), id: "step-timeline" }, "open this step on the timeline"), " · ",
        h("a", { href: U.runHref(ctx.run, "operators", { step: r.step }) }, "its operators"), " · ",
        h("a", { href: U.runHref(ctx.run, "step_trace") }, "all steps")),
      h("div", { class: "row" }, h("div", { class: "grow" }, h("h3", {}, "host view"), Charts.pie(items(P.host))),
        device ? h("div", { class: "grow" }, h("h3", {}, "device view"), Charts.pie(items(P.device))) : null));
  }

  async function dataLoading(ctx) {
    const { run, el, step } = ctx;
    const [rows, calls] = await Promise.all([load("data_loading", run, {}), load("data_loader_calls", run, { step })]);
    const total = rows.reduce((a, r) => a + r.step_ns, 0), dl = rows.reduce((a, r) => a + r.data_loading_ns, 0);
    U.fill(el, h("h1", {}, "Data loading"),
      rows.length ? U.tiles([["waiting for data", total ? fmtShare(dl / total) : "—", `${fmtNs(dl)} of ${fmtNs(total)} step time`, "dl-share"],
        ["worst step", (() => { const w = rows.slice().sort((a, b) => b.data_loading_ns - a.data_loading_ns)[0]; return w.data_loading_ns > 0 ? `#${w.step}: ${fmtNs(w.data_loading_ns)}` : "—"; })(),
          dl > 0 ? "the step that waited longest" : "no step waited for data", "dl-worst"]]) : null,
      rows.length ? card("Data loading per step (click a step for its timeline)", "data_loading", { run },
        Charts.bars(rows.map(r => ({ label: `#${r.step}`, step: r.step, dl: r.data_loading_ns, rest: r.step_ns - r.data_loading_ns })),
          [{ key: "dl", name: "data loading", color: U.conceptColor("data_loading") }, { key: "rest", name: "rest of the step", color: "#c9ced8" }],
          { xName: "step", yName: "step time", onClick: r => { location.hash = U.timelineHref(run, { step: r.step }); } }),
        DataTable(rows, [{ key: "step", label: "step", num: true }, { key: "step_ns", label: "step", kind: "ns" },
          { key: "data_loading_ns", label: "data loading", kind: "ns" }, { key: "data_loading_pct", label: "share (%)", kind: "pct" }],
          { sortKey: "step", sortDir: 1 })) : U.naBox("No steps in this run."),
      card("Data-loading spans (each opened by a DataLoader call, or Python)", "data_loader_calls", { run, step }, calls.length ? DataTable(calls, [
        { key: "name", label: "name" }, { key: "step", label: "step", num: true }, { key: "tid", label: "thread", num: true },
        { key: "dur_ns", label: "duration", kind: "ns" },
        { key: "open", label: "", fmt: (v, r) => r.name.startsWith("(") ? "" : h("a", { href: U.timelineHref(run, { name: r.name, step: r.step }), class: "tl-link" }, "timeline") }],
        { sortKey: "dur_ns" }) : h("p", { class: "muted" }, "No data-loading time recorded.")));
  }

  U.page("step_trace", "Step trace", stepTrace);
  U.page("data_loading", "Data loading", dataLoading);
})();
