"use strict";
// Overview (headline numbers, step time by category, GPU figures, the advisor's top findings) and the
// advisor page (every finding with its evidence, each piece linked to the page or timeline slice it is about).
(() => {
  const { h, getJSON, card, fmtNs, fmtShare, fmtPct, fmtBytes, fmtNum, tiles } = U;

  const when = ns => ns ? new Date(Number(BigInt(ns) / 1000000n)).toISOString().replace("T", " ").slice(0, 19) + " UTC" : "-";

  function jobCard(o) {
    const j = o.job;
    const rows = [["job", j.job], ["rank", j.rank ?? "—"], ["device", o.device.label],
      ["collected", `${when(j.start_ns)}, ${fmtNs(j.end_ns - j.start_ns)} captured`], ["steps", j.step_count],
      ["events", fmtNum(j.event_count)], ["raw data", fmtBytes(j.raw_bytes)], ["parsed output", fmtBytes(j.output_bytes)]];
    return card("Run", null, null, h("dl", { class: "kv" }, rows.flatMap(([k, v]) => [h("dt", {}, k), h("dd", {}, String(v))])));
  }

  function categoryCards(ctx, o) {
    const { run, step } = ctx;
    const cats = o.categories.filter(c => c.mean_ns > 0);
    const color = c => U.conceptColor(c.key);
    const view = o.category_view === "device" ? "device view: what the device did, or why it idled"
      : "host view: no device work in this run";
    const perStep = o.step_categories.map(r => ({ ...r, label: `#${r.step}` }));
    return h("div", { class: "row" },
      card("Step time breakdown (mean per step)", "step_categories", { run, step },
        h("p", { class: "muted" }, view),
        Charts.pie(cats.map(c => ({ name: c.label, value: c.mean_ns, color: color(c) }))),
        DataTable(o.categories.filter(c => c.mean_ns > 0 || o.category_view === "device"), [
          { key: "label", label: "category" }, { key: "mean_ns", label: "mean per step", kind: "ns" },
          { key: "share", label: "share of step (%)", kind: "share" }], { sortKey: "mean_ns", limit: 20 })),
      h("div", { class: "grow" },
        card("Step time by category, per step (click a step for its timeline)", "step_categories", { run, step },
          Charts.bars(perStep, o.categories.map(c => ({ key: `${c.key}_ns`, name: c.label, color: color(c) })),
            { xName: "step", yName: "step time", height: 260, onClick: r => { location.hash = U.timelineHref(run, { step: r.step }); } })),
        card("The step thread's phases (mean per step)", "steps", { run, step },
          Charts.hbars(o.host_phases.filter(p => p.mean_ns > 0).map((p, i) => ({ name: p.label, value: p.mean_ns,
            color: U.conceptColor(p.key), key: p.key })), { xName: "time per step",
            onClick: p => { location.hash = U.runHref(run, ctx.features.callsites.available ? "callsites" : "step_trace", { phase: p.key }); } }),
          h("p", { class: "muted" }, ctx.features.callsites.available ? "Click a phase for the lines of your code it was spent in."
            : "Phases from the attribution (docs/attribution.md)."))));
  }

  // Loss first, then throughput, then the rest: the scalars a trainer or log_scalar recorded, per step.
  function metricsCard(ctx, rows) {
    const names = [...new Set(rows.flatMap(r => Object.keys(r).filter(k => k !== "step" && k !== "dur_ns")))];
    const rank = n => n === "loss" ? 0 : n.endsWith("_per_second") ? 1 : 2;
    const shown = names.sort((a, b) => rank(a) - rank(b) || a.localeCompare(b)).slice(0, 4);
    const timed = rows.filter(r => r.dur_ns);
    return card(`Training metrics per step (${names.length} recorded${names.length > shown.length ? `, ${shown.length} shown` : ""})`,
      "training_metrics", { run: ctx.run },
      h("div", { class: "row" }, ...shown.map((n, i) => h("div", { class: "grow" },
        h("p", { class: "muted" }, n.replace(/_/g, " ")),
        Charts.stepLine(rows, n, { yName: n.replace(/_/g, " "), color: U.PALETTE[(i + 1) % 10] })))),
      timed.length ? h("p", { class: "muted" }, `Profiled steps with a metric: ${timed.length}; their step time is in the charts above.`) : null);
  }

  async function overview(ctx) {
    const { run, el, step } = ctx;
    const o = await getJSON(`/api/overview?${U.query({ run, step })}`);
    const g = o.gpu, a = o.advisor, dl = o.data_loading;
    const warnings = (a.findings || []).filter(f => f.severity !== "info");
    U.fill(el, h("h1", {}, "Overview", step !== null ? h("span", { class: "muted" }, ` · step ${step}`) : null),
      o.step_count ? tiles([
        ["mean step time", fmtNs(o.mean_step_ns), `median ${fmtNs(o.median_step_ns)} over ${o.step_count} step(s)`, "tile-step"],
        g ? [`${o.device.kind === "gpu" ? "GPU" : (o.device.kind || "device").toUpperCase()} utilisation`, fmtShare(g.utilization), "device busy, share of step time", "tile-gpu-util"] : null,
        g && g.sm_efficiency !== null ? ["SM efficiency", fmtShare(g.sm_efficiency), "kernel time × share of SMs its grid fills", "tile-sm-eff"] : null,
        g && g.achieved_occupancy_pct !== null ? ["achieved occupancy", fmtPct(g.achieved_occupancy_pct), "kernel-time weighted (trace estimate)", "tile-occupancy"] : null,
        g && g.tensor_core_share !== null && g.tensor_core_share !== undefined ? ["Tensor Cores", fmtShare(g.tensor_core_share), "of kernel time in kernels that use them", "tile-tensor-cores"] : null,
        ["data loading", dl.data_loading_pct === null ? "—" : fmtPct(dl.data_loading_pct), "of step time, waiting for the next batch", "tile-dl"],
        a.explained ? ["advisor", `${warnings.length} warning(s)`, `explaining ${fmtShare(a.explained.explained_share)} of step time`, "tile-advisor"] : null,
      ]) : U.naBox("No steps in this run: the figures below cover the whole trace where they can."),
      o.step_count ? categoryCards(ctx, o) : null,
      (o.training_metrics || []).length ? metricsCard(ctx, o.training_metrics) : null,
      h("div", { class: "row" },
        card("Advisor: top findings", "/api/advisor", { run }, findingList(ctx, a, 5),
          (a.findings || []).length > 5 ? h("p", {}, h("a", { href: U.runHref(run, "advisor", ctx.step ? { step } : {}) }, `all ${a.findings.length} findings with their evidence →`)) : null),
        jobCard(o)),
      envCard(run));
  }

  // Environment variables and trace metadata, folded: fetched when opened.
  function envCard(run) {
    const body = h("div");
    const box = h("details", { id: "environment" }, h("summary", {}, "Environment and trace metadata"), body);
    box.addEventListener("toggle", async () => {
      if (!box.open || body.childElementCount) return;
      const { rows } = await U.getRows(U.dataUrl("environment", { run }));
      U.fill(body, U.downloads("environment", { run }), DataTable(rows, [{ key: "key", label: "key" }, { key: "value", label: "value", wide: true }], { limit: 500 }));
    });
    return h("section", { class: "card" }, box);
  }

  // Findings, most severe first; each title links to its evidence on the advisor page.
  function findingList(ctx, report, limit) {
    if (report.available === false) return U.naBox(report.reason, "advisor-na");
    if (!report.findings.length)
      return h("p", { class: "muted", id: "advisor-none" }, `No findings: ${report.rules_run.length} rules found nothing worth reporting in ${report.step_count} step(s).`);
    return h("ul", { class: "findings", id: "advisor-findings" }, report.findings.slice(0, limit || undefined).map((f, i) =>
      h("li", { class: `sev-${f.severity}` }, h("span", { class: "sev" }, f.severity), " ",
        h("a", { href: U.runHref(ctx.run, "advisor", { finding: i }), class: "finding-title" }, h("b", {}, f.title)),
        f.share ? h("span", { class: "muted" }, ` (${fmtShare(f.share)} of step time)`) : null,
        h("div", { class: "fix" }, "Fix: ", f.fix))));
  }

  function metricValue(k, v) {
    if (v === null || v === undefined) return "—";
    if (typeof v !== "number") return typeof v === "object" ? JSON.stringify(v) : String(v);
    if (k.endsWith("_ns")) return fmtNs(v);
    if (k.endsWith("_bytes")) return fmtBytes(v);
    if (k === "share" || k.endsWith("_share")) return fmtShare(v);
    if (k.endsWith("_percent") || k.endsWith("_pct")) return fmtPct(v);
    return U.sig(v);
  }
  function numbers(obj, skip) {
    return Object.entries(obj).filter(([k]) => !skip.includes(k)).map(([k, v]) => `${k.replace(/_ns$|_bytes$/, "").replace(/_/g, " ")} ${metricValue(k, v)}`).join(" · ");
  }

  // Evidence rows with links: steps to the timeline, ops to their longest call and their table, call sites and modules to their views.
  function evidence(ctx, f) {
    const { run } = ctx, e = f.evidence, worst = (e.steps[0] || {}).step;
    const parts = [];
    const metrics = Object.entries(e.metrics || {});
    if (metrics.length) parts.push(h("dl", { class: "kv metrics" }, metrics.flatMap(([k, v]) => [h("dt", {}, k.replace(/_ns$|_bytes$/, "").replace(/_/g, " ")), h("dd", {}, metricValue(k, v))])));
    if (e.steps.length) parts.push(h("div", { class: "ev" }, h("b", {}, "steps "), h("ul", {}, e.steps.map(s => h("li", {},
      h("a", { href: U.timelineHref(run, { step: s.step }), class: "ev-step" }, `step ${s.step} on the timeline`), " · ",
      h("a", { href: U.runHref(run, "step_trace", { step: s.step }) }, "breakdown"), " ",
      h("span", { class: "muted" }, numbers(s, ["step", "window"])))))));
    if (e.ops.length) parts.push(h("div", { class: "ev" }, h("b", {}, "ops "), h("ul", {}, e.ops.map(o => h("li", {},
      o.pid !== undefined ? h("span", {}, `${o.name} (pid ${o.pid})`, " · ", h("a", { href: U.runHref(run, "host") }, "host resources"))
        : h("span", {}, h("a", { href: U.timelineHref(run, { name: o.name, step: worst ?? "" }), class: "ev-op" }, o.name),
          " · ", h("a", { href: U.runHref(run, "operators", { op: o.name }) }, "in the operator table")),
      " ", h("span", { class: "muted" }, numbers(o, ["name", "pid"])))))));
    if (e.call_sites.length) parts.push(h("div", { class: "ev" }, h("b", {}, "call sites "), h("ul", {}, e.call_sites.map(c => h("li", {},
      c.call_site ? h("a", { href: U.runHref(run, "callsites", { site: c.call_site }), class: "ev-site" }, c.call_site) : null,
      c.module ? [" · module ", h("a", { href: U.runHref(run, "modules", { path: c.module }), class: "ev-module" }, c.module)] : null,
      " ", h("span", { class: "muted" }, numbers(c, ["call_site", "module", "leaf"])))))));
    return parts;
  }

  async function advisorPage(ctx) {
    const { run, el, query } = ctx;
    const a = await getJSON(`/api/advisor?${U.query({ run })}`);
    if (a.available === false) { U.fill(el, h("h1", {}, "Advisor"), U.naBox(a.reason, "advisor-na")); return; }
    const x = a.explained;
    const focus = query.finding === undefined ? null : Number(query.finding);
    U.fill(el, h("h1", {}, "Advisor"),
      h("p", { class: "muted" }, `${a.rules_run.length} rules over ${a.step_count} step(s)` + (a.whole_trace ? " (no steps: each capture window judged as one step)" : "") +
        (a.notes.length ? `. ${a.notes.join(" ")}` : "")),
      x ? card("How much of the step time the warnings explain", null, null,
        h("p", {}, h("b", { id: "explained-share" }, fmtShare(x.explained_share)), " explained (a lower bound: overlapping findings count once), ",
          h("b", {}, fmtShare(x.unexplained_share)), " left that no warning accounts for." +
          (x.cross_cutting.length ? ` Cross-cutting: ${x.cross_cutting.join(", ")}.` : "")),
        Charts.bars(Object.entries(x.by_part).map(([part, v]) => ({ label: part.replace("_", " "), explained: v.explained_share * 100,
          left: Math.max(0, v.share - v.explained_share) * 100 })),
        [{ key: "explained", name: "explained by a warning", color: "#e15759" }, { key: "left", name: "not explained", color: "#bab0ac" }],
        { kind: "percent", yName: "share of step time", xName: "part of the step", height: 240 })) : null,
      a.findings.length ? h("div", { id: "advisor-all" }, a.findings.map((f, i) => h("section", {
        class: `card finding sev-${f.severity}`, id: `finding-${i}`, dataset: { finding: f.id } },
        h("div", { class: "card-head" }, h("span", { class: "sev" }, f.severity), h("h2", {}, f.title)),
        h("p", {}, f.share ? `${fmtShare(f.share)} of step time · ${fmtNs(f.impact_ns)} over the profiled steps` : `rule ${f.id}`),
        h("p", { class: "fix" }, h("b", {}, "Fix: "), f.fix), ...evidence(ctx, f))))
        : findingList(ctx, a));
    if (focus !== null) requestAnimationFrame(() => {
      const target = el.querySelector(`#finding-${focus}`);
      if (target) { target.classList.add("focus"); target.scrollIntoView({ block: "start" }); }
    });
  }

  U.page("overview", "Overview", overview);
  U.page("advisor", "Advisor", advisorPage);
})();
