"use strict";
// Operators (by name -> by input shapes -> single calls, each call linked to its own slice on the
// timeline) and kernels (by name -> single launches), following the header's step.
(() => {
  const { h, getRows, dataUrl, card, fmtShare } = U;
  const load = (name, run, extra) => getRows(dataUrl(name, { run, ...extra }));
  const TOP = 20;

  // Host self time on every run; device time too when the run has device work (else a column of zeros).
  function metricsOf(ctx) {
    const device = ctx.features.kernels && ctx.features.kernels.available && ctx.summary.device_kind !== "cpu";
    return device ? [["host_self_ns", "host self time"], ["device_self_ns", "device time (kernels it launched)"]]
      : [["host_self_ns", "host self time"]];
  }

  async function operators(ctx) {
    const { run, el, step, query } = ctx;
    const { rows: ops } = await load("op_statistic", run, { step });
    const metrics = metricsOf(ctx), device = metrics.length > 1;
    const metric = metrics.find(([k]) => k === query.metric) || metrics[device ? 1 : 0];
    const opsOnly = ops.filter(r => r.kind === "op");
    const ranked = opsOnly.slice().sort((a, b) => (b[metric[0]] || 0) - (a[metric[0]] || 0)).filter(r => r[metric[0]] > 0);
    const top = ranked.slice(0, TOP), rest = ranked.slice(9);
    // One colour per op on both charts, told apart where two ops' own colours are nearly one hue.
    const colours = U.distinctColors(ranked.slice(0, Math.max(TOP, 9)).map(r => r.name));
    const pieItems = [...ranked.slice(0, 9).map((r, k) => ({ name: r.name, value: r[metric[0]], color: colours[k] })),
      ...(rest.length ? [{ name: `other ops (${rest.length})`, value: rest.reduce((a, r) => a + r[metric[0]], 0), color: "#c9ced8" }] : [])];
    const drill = h("div", { id: "op-drill" });
    const cols = [{ key: "name", label: "operator" }, { key: "kind", label: "kind", title: "annotation: a record_function range; its self time is Python between the ops it encloses" },
      { key: "count", label: "calls", kind: "count" },
      { key: "host_self_ns", label: "host self", kind: "ns" }, { key: "host_total_ns", label: "host total", kind: "ns" },
      { key: "avg_self_ns", label: "avg self", kind: "ns" }, { key: "max_self_ns", label: "max self", kind: "ns" },
      ...(device ? [{ key: "device_self_ns", label: "device self", kind: "ns" }, { key: "device_total_ns", label: "device total", kind: "ns" }] : []),
      { key: "ratio_pct", label: "host self %", kind: "pct" }];
    // A click drills down and is a step in the history: Back returns to the table, a reload keeps the drill-down.
    const showDrill = r => { U.setHashParams({ op: r.name }, true); opDrill(ctx, r.name, drill, device); };
    const pick = device ? h("label", {}, "rank by ", h("select", { id: "op-metric", onchange: e => ctx.go({ metric: e.target.value }) },
      metrics.map(([k, label]) => h("option", { value: k, selected: k === metric[0] }, label)))) : null;
    const annotations = ops.length - opsOnly.length;
    U.fill(el, h("h1", {}, "Operators", step !== null ? h("span", { class: "muted" }, ` · step ${step}`) : null),
      h("div", { class: "table-tools" }, pick, h("span", { class: "muted" }, `Charts show framework ops by ${metric[1]}` +
        (annotations ? `; ${annotations} annotation(s) (record_function ranges, ProfilerStep) are in the table only` : "") + ".")),
      h("div", { class: "row" },
        card(`Share of ${metric[1]} (top 9 ops + other)`, "op_statistic", { run, step }, ranked.length ? Charts.pie(pieItems) : U.naBox("No op time.")),
        card(`Top ${top.length} ops by ${metric[1]}`, "op_statistic", { run, step },
          top.length ? Charts.hbars(top.map((r, k) => ({ name: r.name, value: r[metric[0]], note: `${U.fmtNum(r.count)} calls`, color: colours[k] })),
            { xName: metric[1], onClick: showDrill }) : U.naBox("No op time."))),
      card("All operators (click one for its input shapes and calls)", "op_statistic", { run, step },
        DataTable(ops, cols, { sortKey: metric[0], onRowClick: showDrill, rowKey: r => r.name, selected: query.op ?? null, reveal: true,
          stateKey: "ops" })),
      drill);
    // From the URL (a link, Back, a reload): the table's row is revealed, so the drill-down does not scroll.
    if (query.op && ops.some(x => x.name === query.op)) opDrill(ctx, query.op, drill, device, false);
  }

  async function opDrill(ctx, name, el, device, scroll = true) {
    const { run, step } = ctx;
    const [{ rows: shapes }, { rows: sites }] = await Promise.all([load("operator_details", run, { step, name }),
      load("op_call_sites", run, { step, name })]);
    const calls = h("div", { id: "op-calls" });
    U.fill(el, card(`${name}: by input shapes (click a row for its slowest calls)`, "operator_details", { run, step, name },
      h("div", { class: "breadcrumb" }, "operators › ", h("b", {}, name)),
      DataTable(shapes, [{ key: "input_dims", label: "input shapes", wide: true }, { key: "input_types", label: "input types", wide: true },
        { key: "count", label: "calls", kind: "count" }, { key: "host_self_ns", label: "host self", kind: "ns" },
        { key: "host_total_ns", label: "host total", kind: "ns" },
        ...(device ? [{ key: "device_self_ns", label: "device self", kind: "ns" }, { key: "device_total_ns", label: "device total", kind: "ns" }] : [])],
        { sortKey: "host_total_ns", onRowClick: r => opCalls(ctx, name, r.input_dims, calls) })), callSites(ctx, name, sites), calls);
    if (shapes.length === 1) opCalls(ctx, name, shapes[0].input_dims, calls);
    if (scroll) el.scrollIntoView({ block: "nearest" });
  }

  // Where the op was called from: the user's lines (and module) around its calls, from Kineto's Python frames
  // (with_stack) or else from mlprof's stack samples taken while it ran.
  function callSites(ctx, name, rows) {
    const { run, step } = ctx;
    if (!rows.length) {
      return h("p", { class: "muted", id: "op-call-sites-none" }, "Called from: no Python stacks in this run " +
        "(record them with mlprof run, which samples them, or with_stack=True).");
    }
    const traced = rows[0].source === "traced";
    const site = v => v === null || v === undefined ? "(no user frame)" : v;
    return card(`${name}: called from (${traced ? "Python frames in the trace, each call once" : "stack samples taken while it ran"})`,
      "op_call_sites", { run, step, name },
      h("div", { id: "op-call-sites" }, DataTable(rows, traced
        ? [{ key: "call_site", label: "line", wide: true, fmt: site }, { key: "module", label: "module", fmt: v => v || "" },
          { key: "count", label: "calls", kind: "count" }, { key: "self_ns", label: "self time", kind: "ns" }]
        : [{ key: "call_site", label: "line", wide: true, fmt: site }, { key: "leaf", label: "innermost frame", wide: true },
          { key: "samples", label: "samples", kind: "count" }, { key: "self_ns", label: "time (samples × interval)", kind: "ns" }],
        { sortKey: traced ? "self_ns" : "samples" })));
  }

  async function opCalls(ctx, name, dims, el) {
    const { run, step } = ctx;
    const params = { step, name, input_dims: dims === null ? "" : dims };
    const { rows, total } = await load("op_calls", run, params);
    U.fill(el, card(`${name} ${dims ?? "(no shapes)"}: slowest calls`, "op_calls", { run, ...params },
      DataTable(rows, [{ key: "op_id", label: "id", num: true }, { key: "step", label: "step", num: true },
        { key: "tid", label: "thread", num: true }, { key: "dur_ns", label: "total", kind: "ns" }, { key: "self_ns", label: "self", kind: "ns" },
        // Each call to its own slice (not the first call of the name).
        { key: "link", label: "", fmt: (v, r) => h("a", { href: U.timelineHref(run, { src: 0, id: r.op_id }), class: "tl-link" }, "timeline") }],
        { sortKey: "dur_ns", total, cutBy: "slowest first" })));
  }

  async function kernels(ctx) {
    const { run, el, step, query } = ctx;
    const npu = ctx.summary.device_kind === "npu";
    const [{ rows: ks }, { rows: apis }, cores] = await Promise.all([load("kernel_statistic", run, { step }),
      load("api_statistic", run, { step }), npu ? load("npu_cores", run, { step }) : Promise.resolve({ rows: [] })]);
    const drill = h("div", { id: "kernel-drill" });
    const showCalls = async r => {
      const { rows, total } = await load("kernel_calls", run, { step, name: r.name });
      U.fill(drill, card(`${r.name}: slowest launches`, "kernel_calls", { run, step, name: r.name },
        DataTable(rows, [{ key: "device_op_id", label: "id", num: true }, { key: "step", label: "step", num: true },
          { key: "device", label: "device", num: true }, { key: "stream", label: "stream", num: true },
          { key: "dur_ns", label: "duration", kind: "ns" }, { key: "grid", label: "grid" }, { key: "block", label: "block" },
          { key: "occupancy_pct", label: "occupancy %", kind: "pct" },
          { key: "host_op", label: "launched by", wide: true, fmt: (v, x) => x.host_op_id === null ? "" :
            h("a", { href: U.timelineHref(run, { src: 0, id: x.host_op_id }) }, v) },
          { key: "link", label: "", fmt: (v, x) => h("a", { href: U.timelineHref(run, { src: 2, id: x.device_op_id }), class: "tl-link" }, "timeline") }],
          { sortKey: "dur_ns", total, cutBy: "slowest first" })));
      drill.scrollIntoView({ block: "nearest" });
    };
    const short = U.shortNames(ks.map(k => k.name), 90);
    ks.forEach((k, i) => { k.short = short[i]; });
    U.fill(el, h("h1", {}, "Kernels", step !== null ? h("span", { class: "muted" }, ` · step ${step}`) : null),
      ks.length ? h("div", {},
        card(`Top ${Math.min(TOP, ks.length)} by total device time`, "kernel_statistic", { run, step },
          Charts.hbars(ks.slice(0, TOP).map(r => ({ name: r.name, value: r.total_ns, note: `${r.kind}, ${U.fmtNum(r.count)} launches, ${fmtShare(r.ratio_pct / 100)} of device time` })),
            { xName: "device time", labelChars: 56, onClick: r => showCalls(ks.find(k => k.name === r.name)) })),
        card("Device kernels, copies and memsets (click one for its slowest launches)", "kernel_statistic", { run, step },
          DataTable(ks, [{ key: "name", label: "name", fmt: (v, r) => r.short }, { key: "kind", label: "kind" }, { key: "count", label: "calls", kind: "count" },
            { key: "total_ns", label: "total", kind: "ns" }, { key: "avg_ns", label: "avg", kind: "ns" },
            { key: "min_ns", label: "min", kind: "ns" }, { key: "max_ns", label: "max", kind: "ns" },
            { key: "ratio_pct", label: "% of device time", kind: "pct" },
            { key: "tensor_cores", label: "Tensor Cores", fmt: v => v ? "yes" : "" }], { sortKey: "total_ns", onRowClick: showCalls, rowKey: r => r.name + r.kind, stateKey: "kernels" })),
        drill) : U.naBox("No device kernels or copies in this run.", "no-kernels"),
      cores.rows.length ? npuCores(cores.rows, run, step) : null,
      card("Runtime API calls", "api_statistic", { run, step }, apis.length ? DataTable(apis, [{ key: "name", label: "API" },
        { key: "count", label: "calls", kind: "count" }, { key: "total_ns", label: "total", kind: "ns" },
        { key: "avg_ns", label: "avg", kind: "ns" }, { key: "max_ns", label: "max", kind: "ns" },
        { key: "ratio_pct", label: "%", kind: "pct" }], { sortKey: "total_ns" }) : h("p", { class: "muted" }, "No runtime API calls.")));
    if (query.kernel) { const r = ks.find(x => x.name === query.kernel); if (r) showCalls(r); }
  }

  // Ascend: time by compute unit (AI Core's cube, its vector unit, AI CPU, ...) and, with PMU counters, the
  // share of each unit's busy time each pipe was busy (compute: mac/vec; memory transfers: mte1-3).
  const PIPE_LABELS = { mac: "cube (mac)", vec: "vector", scalar: "scalar", mte1: "mte1 (L1)", mte2: "mte2 (HBM in)",
    mte3: "mte3 (out)", fixpipe: "fixpipe" };
  function npuCores(rows, run, step) {
    const pipeKeys = [...new Set(rows.flatMap(r => Object.keys(r).filter(k => /^(aic|aiv)_[a-z0-9]+$/.test(k))))].sort();
    const pipeCols = pipeKeys.map(k => {
      const [unit, pipe] = k.split("_");
      return { key: k, label: `${unit === "aic" ? "cube core" : "vector core"}: ${PIPE_LABELS[pipe] || pipe} %`, kind: "share" };
    });
    return h("div", { id: "npu-cores" },
      card("NPU time by compute unit", "npu_cores", { run, step },
        Charts.hbars(rows.map(r => ({ name: r.core, value: r.total_ns,
          note: `${U.fmtNum(r.ops)} tasks, ${fmtShare(r.ratio_pct / 100)} of NPU time, most in ${r.top_op_type}` })),
          { xName: "device time", labelChars: 24 }),
        DataTable(rows, [{ key: "core", label: "unit" }, { key: "ops", label: "tasks", kind: "count" },
          { key: "op_types", label: "op types", kind: "count" }, { key: "total_ns", label: "total", kind: "ns" },
          { key: "avg_ns", label: "avg", kind: "ns" }, { key: "ratio_pct", label: "% of NPU time", kind: "pct" },
          { key: "top_op_type", label: "most time in" },
          { key: "bound", label: "busier pipes", fmt: v => v === "memory" ? "memory transfers" : v === "compute" ? "compute" : "" },
          ...pipeCols], { sortKey: "total_ns", stateKey: "npu-cores" }),
        pipeCols.length ? null : h("p", { class: "muted" },
          "No PMU counters in this run (profiler_level Level0): the pipes of each unit need Level1 or Level2.")));
  }

  U.page("operators", "Operators", operators);
  U.page("kernels", "Kernels", kernels);
})();
