"use strict";
// One function per page; each gets {run, el, step} and fills el from the API.
const Pages = (() => {
  const { h, getJSON, dataUrl, fmtNs, fmtMs, fmtPct, fmtNum, fmtBytes, card } = U;
  const ms = v => fmtMs(v), pct = v => fmtPct(v), num = v => fmtNum(v);
  const DEVICE_SERIES = [["computing_ns", "computing"], ["communication_not_overlapped_ns", "communication (not overlapped)"],
    ["preparing_ns", "preparing"], ["free_ns", "free"]];
  const HOST_SERIES = [["data_loading_ns", "data loading"], ["forward_ns", "forward"], ["backward_ns", "backward"],
    ["optimizer_ns", "optimizer"], ["host_communication_ns", "host communication"],
    ["gc_ns", "garbage collection"], ["python_ns", "Python outside ops"], ["other_ns", "other ops"]];
  const load = (name, run, extra) => getJSON(dataUrl(name, { run, ...extra }));

  function stepChart(steps, series) {
    return Charts.stackedBars(steps.map(r => ({ label: `#${r.step}`, values: r })), series);
  }
  function hasDevice(steps) { return steps.some(r => r.computing_ns !== null && r.computing_ns !== undefined); }

  async function overview({ run, el }) {
    const o = await getJSON(`/api/overview?${U.query({ run })}`);
    const j = o.job;
    const when = ns => ns ? new Date(Number(BigInt(ns) / 1000000n)).toISOString().replace("T", " ").slice(0, 23) + " UTC" : "-";
    const kv = h("dl", { class: "kv" }, ...[["job", j.job], ["rank", j.rank ?? "-"],
      ["devices", j.devices.length ? j.devices.join(", ") : "CPU only"],
      ["collected", `${when(j.start_ns)} (${fmtNs(j.end_ns - j.start_ns)})`], ["steps", j.step_count],
      ["events", fmtNum(j.event_count)], ["raw data", fmtBytes(j.raw_bytes)], ["parsed output", fmtBytes(j.output_bytes)]]
      .flatMap(([k, v]) => [h("dt", {}, k), h("dd", {}, String(v))]));
    const steps = o.steps;
    const device = hasDevice(steps);
    const dl = o.data_loading;
    el.replaceChildren(
      h("h1", {}, "Overview"),
      h("div", { class: "row" },
        card("Run", null, null, kv),
        card("Data loading share", "data_loading", { run }, dl.data_loading_pct === null ? h("p", { class: "muted" }, "No steps in this run.") :
          h("div", {}, h("div", { class: "big-number", id: "dl-share" }, fmtPct(dl.data_loading_pct)),
            h("p", { class: "muted" }, `${fmtNs(dl.data_loading_ns)} of ${fmtNs(dl.steps_ns)} step time waiting for the DataLoader`)))),
      card(`Step time (${device ? "device view" : "host view"})`, "steps", { run },
        steps.length ? stepChart(steps, device ? DEVICE_SERIES : HOST_SERIES) : h("p", { class: "muted" }, "No steps in this run.")),
      h("div", { class: "row" },
        card("Host self time by operator", "op_statistic", { run },
          Charts.pie(o.op_pie.map(r => ({ name: r.name, value: r.host_self_ns })))),
        card("Advisor", "/api/advisor", { run }, advisorList(o.advisor))),
      card("Environment", "environment", { run }, DataTable(o.environment, [{ key: "key", label: "key" }, { key: "value", label: "value", wide: true }], { limit: 200 })),
    );
  }

  function advisorList(report) {
    if (report.available === false) return h("p", { class: "na-box", id: "advisor-na" }, report.reason);
    if (!report.findings.length)
      return h("p", { class: "muted", id: "advisor-none" }, `No findings: ${report.rules_run.length} rules found nothing worth reporting in ${report.step_count} step(s).`);
    return h("ul", { class: "findings", id: "advisor-findings" }, report.findings.map(f => h("li", { class: `sev-${f.severity}` },
      h("span", { class: "sev" }, f.severity), " ", h("b", {}, f.title),
      f.share ? h("span", { class: "muted" }, ` (${(100 * f.share).toFixed(1)} % of step time)`) : null,
      h("div", { class: "fix" }, "Fix: ", f.fix),
      h("details", {}, h("summary", {}, "evidence"), h("dl", { class: "kv" },
        ...Object.entries(f.evidence.metrics || {}).flatMap(([k, v]) => [h("dt", {}, k), h("dd", {}, typeof v === "number" && k.endsWith("_ns") ? fmtNs(v) : String(v))])),
        (f.evidence.ops || []).length ? h("div", {}, "ops: ", f.evidence.ops.slice(0, 8).map(x => x.name).join(", ")) : null,
        (f.evidence.steps || []).length ? h("div", {}, "steps: ", f.evidence.steps.slice(0, 8).map(x => "#" + x.step).join(", ")) : null))));
  }

  function stepSelect(steps, current, onChange) {
    return h("label", {}, "step ", h("select", { onchange: e => onChange(e.target.value) },
      h("option", { value: "" }, "all"), steps.map(s => h("option", { value: s, selected: String(s) === String(current) }, `#${s}`))));
  }

  async function operators(ctx) {
    const { run, el, step } = ctx;
    const [ops, steps] = await Promise.all([load("op_statistic", run, { step }), load("steps", run, {})]);
    const drill = h("div", { id: "op-drill" });
    const top = ops.slice(0, 20);
    const cols = [{ key: "name", label: "operator" }, { key: "count", label: "calls", num: true, fmt: num },
      { key: "host_self_ns", label: "host self (ms)", num: true, fmt: ms }, { key: "host_total_ns", label: "host total (ms)", num: true, fmt: ms },
      { key: "avg_self_ns", label: "avg self (ms)", num: true, fmt: ms }, { key: "max_self_ns", label: "max self (ms)", num: true, fmt: ms },
      { key: "device_self_ns", label: "device self (ms)", num: true, fmt: ms }, { key: "device_total_ns", label: "device total (ms)", num: true, fmt: ms },
      { key: "ratio_pct", label: "host self %", num: true, fmt: pct }];
    const showDrill = r => opDrill(run, step, r.name, drill);
    el.replaceChildren(
      h("h1", {}, "Operators"),
      h("div", { class: "table-tools" }, stepSelect(steps.map(s => s.step), step, v => ctx.go({ step: v }))),
      h("div", { class: "row" },
        card("Share of host self time (top 9 + other)", "op_statistic", { run, step },
          Charts.pie([...ops.slice(0, 9).map(r => ({ name: r.name, value: r.host_self_ns })),
            ...(ops.length > 9 ? [{ name: `other (${ops.length - 9})`, value: ops.slice(9).reduce((a, r) => a + r.host_self_ns, 0) }] : [])])),
        card("Top 20 by host self time", "op_statistic", { run, step },
          Charts.hbars(top.map(r => ({ name: r.name, value: r.host_self_ns }))))),
      card("All operators (click one for its input shapes and calls)", "op_statistic", { run, step },
        DataTable(ops, cols, { sortKey: "host_self_ns", onRowClick: showDrill })),
      drill);
  }

  async function opDrill(run, step, name, el) {
    const shapes = await load("operator_details", run, { step, name });
    const calls = h("div", { id: "op-calls" });
    el.replaceChildren(card(`${name}: by input shapes`, "operator_details", { run, step, name },
      h("div", { class: "breadcrumb" }, "operators › ", h("b", {}, name)),
      DataTable(shapes, [{ key: "input_dims", label: "input shapes", wide: true }, { key: "input_types", label: "input types", wide: true },
        { key: "count", label: "calls", num: true, fmt: num }, { key: "host_self_ns", label: "host self (ms)", num: true, fmt: ms },
        { key: "host_total_ns", label: "host total (ms)", num: true, fmt: ms }, { key: "device_self_ns", label: "device self (ms)", num: true, fmt: ms },
        { key: "device_total_ns", label: "device total (ms)", num: true, fmt: ms }],
        { sortKey: "host_total_ns", onRowClick: r => opCalls(run, step, name, r.input_dims, calls) })), calls);
    el.scrollIntoView({ block: "nearest" });
  }

  async function opCalls(run, step, name, dims, el) {
    const params = { step, name, input_dims: dims === null ? "" : dims };
    const rows = await load("op_calls", run, params);
    el.replaceChildren(card(`${name} ${dims ?? "(no shapes)"}: slowest calls`, "op_calls", { run, ...params },
      DataTable(rows, [{ key: "op_id", label: "id", num: true }, { key: "step", label: "step", num: true },
        { key: "tid", label: "thread", num: true }, { key: "dur_ns", label: "total (ms)", num: true, fmt: ms },
        { key: "self_ns", label: "self (ms)", num: true, fmt: ms },
        { key: "op_id", label: "", fmt: (v, r) => h("a", { href: `#/run/${encodeURIComponent(run)}/timeline?find=${encodeURIComponent(name)}` }, "timeline") }],
        { sortKey: "dur_ns" })));
  }

  async function kernels(ctx) {
    const { run, el, step } = ctx;
    const [ks, apis, steps] = await Promise.all([load("kernel_statistic", run, { step }), load("api_statistic", run, { step }), load("steps", run, {})]);
    const drill = h("div", { id: "kernel-drill" });
    el.replaceChildren(h("h1", {}, "Kernels"),
      h("div", { class: "table-tools" }, stepSelect(steps.map(s => s.step), step, v => ctx.go({ step: v }))));
    if (!ks.length) el.append(h("p", { class: "na-box", id: "no-kernels" }, "No device kernels or copies in this run (a CPU-only trace)."));
    else el.append(
      card("Top 20 by total device time", "kernel_statistic", { run, step }, Charts.hbars(ks.slice(0, 20).map(r => ({ name: r.name, value: r.total_ns })))),
      card("Device kernels, copies and memsets (click one for its slowest calls)", "kernel_statistic", { run, step },
        DataTable(ks, [{ key: "name", label: "name" }, { key: "kind", label: "kind" }, { key: "count", label: "calls", num: true, fmt: num },
          { key: "total_ns", label: "total (ms)", num: true, fmt: ms }, { key: "avg_ns", label: "avg (µs)", num: true, fmt: v => (v / 1e3).toFixed(3) },
          { key: "min_ns", label: "min (µs)", num: true, fmt: v => (v / 1e3).toFixed(3) }, { key: "max_ns", label: "max (µs)", num: true, fmt: v => (v / 1e3).toFixed(3) },
          { key: "ratio_pct", label: "% of device time", num: true, fmt: pct }],
          { sortKey: "total_ns", onRowClick: async r => {
            const rows = await load("kernel_calls", run, { step, name: r.name });
            drill.replaceChildren(card(`${r.name}: slowest calls`, "kernel_calls", { run, step, name: r.name },
              DataTable(rows, [{ key: "device_op_id", label: "id", num: true }, { key: "step", label: "step", num: true },
                { key: "device", label: "device", num: true }, { key: "stream", label: "stream", num: true },
                { key: "dur_ns", label: "duration (µs)", num: true, fmt: v => (v / 1e3).toFixed(3) },
                { key: "grid", label: "grid" }, { key: "block", label: "block" }, { key: "host_op", label: "launched by", wide: true }], { sortKey: "dur_ns" })));
          } })), drill);
    el.append(card("Runtime API calls", "api_statistic", { run, step }, apis.length ? DataTable(apis, [{ key: "name", label: "API" },
      { key: "count", label: "calls", num: true, fmt: num }, { key: "total_ns", label: "total (ms)", num: true, fmt: ms },
      { key: "avg_ns", label: "avg (µs)", num: true, fmt: v => (v / 1e3).toFixed(3) }, { key: "max_ns", label: "max (µs)", num: true, fmt: v => (v / 1e3).toFixed(3) },
      { key: "ratio_pct", label: "%", num: true, fmt: pct }], { sortKey: "total_ns" }) : h("p", { class: "muted" }, "No runtime API calls.")));
  }

  async function stepTrace({ run, el }) {
    const steps = await load("steps", run, {});
    const device = hasDevice(steps);
    const cols = [{ key: "step", label: "step", num: true }, { key: "dur_ns", label: "step (ms)", num: true, fmt: ms },
      ...(device ? DEVICE_SERIES.concat([["communication_ns", "communication"], ["overlapped_ns", "overlapped"]]) : []).map(([k, l]) => ({ key: k, label: `${l} (ms)`, num: true, fmt: ms })),
      ...HOST_SERIES.map(([k, l]) => ({ key: k, label: `${l} (ms)`, num: true, fmt: ms }))];
    el.replaceChildren(h("h1", {}, "Step trace"),
      !steps.length ? h("p", { class: "na-box" }, "No steps in this run (no ProfilerStep spans and no mlprof steps.json).") : h("div", {},
        device ? card("Device view per step", "steps", { run }, stepChart(steps, DEVICE_SERIES)) : null,
        card("Host view per step", "steps", { run }, stepChart(steps, HOST_SERIES)),
        card("Steps", "steps", { run }, DataTable(steps, cols, { sortKey: "step", sortDir: 1 }))));
  }

  async function dataLoading({ run, el }) {
    const [rows, calls] = await Promise.all([load("data_loading", run, {}), load("data_loader_calls", run, {})]);
    el.replaceChildren(h("h1", {}, "Data loading"),
      rows.length ? card("Data loading per step", "data_loading", { run },
        Charts.stackedBars(rows.map(r => ({ label: `#${r.step}`, values: { dl: r.data_loading_ns, rest: r.step_ns - r.data_loading_ns } })),
          [["dl", "data loading"], ["rest", "rest of the step"]]),
        DataTable(rows, [{ key: "step", label: "step", num: true }, { key: "step_ns", label: "step (ms)", num: true, fmt: ms },
          { key: "data_loading_ns", label: "data loading (ms)", num: true, fmt: ms }, { key: "data_loading_pct", label: "share", num: true, fmt: pct }],
          { sortKey: "step", sortDir: 1 })) : h("p", { class: "na-box" }, "No steps in this run."),
      card("DataLoader calls", "data_loader_calls", { run }, calls.length ? DataTable(calls, [{ key: "name", label: "name" },
        { key: "step", label: "step", num: true }, { key: "tid", label: "thread", num: true }, { key: "dur_ns", label: "duration (ms)", num: true, fmt: ms }],
        { sortKey: "dur_ns" }) : h("p", { class: "muted" }, "No DataLoader calls recorded.")));
  }

  async function memory({ run, el }) {
    const [peak, tl, byOp] = await Promise.all([load("memory_peak", run, {}), load("memory_timeline", run, {}), load("memory_by_op", run, {})]);
    if (!peak.length) {
      el.replaceChildren(h("h1", {}, "Memory"), h("p", { class: "na-box", id: "no-memory" },
        "No allocator events in this run: profile with profile_memory=True to see memory."));
      return;
    }
    const series = [];
    for (const p of peak) {
      const mine = tl.filter(r => r.device_type === p.device_type && r.device_id === p.device_id);
      const dev = p.device_type === 0 ? "CPU" : `device ${p.device_id}`;
      series.push({ name: `${dev} allocated`, xs: mine.map(r => r.ts_ns), ys: mine.map(r => r.allocated_bytes) });
      series.push({ name: `${dev} reserved`, xs: mine.map(r => r.ts_ns), ys: mine.map(r => r.reserved_bytes) });
    }
    el.replaceChildren(h("h1", {}, "Memory"),
      card("Peak per device", "memory_peak", { run }, DataTable(peak, [{ key: "device_type", label: "device type", num: true },
        { key: "device_id", label: "device", num: true }, { key: "peak_allocated_bytes", label: "peak allocated", num: true, fmt: fmtBytes },
        { key: "peak_reserved_bytes", label: "peak reserved", num: true, fmt: fmtBytes }, { key: "allocations", label: "allocations", num: true, fmt: num }])),
      card("Memory over time", "memory_timeline", { run }, Charts.lines(series.filter(s => s.ys.some(v => v !== null)))),
      card("Allocations by operator", "memory_by_op", { run }, DataTable(byOp, [{ key: "op_name", label: "operator", wide: true },
        { key: "allocations", label: "allocations", num: true, fmt: num }, { key: "size_bytes", label: "bytes allocated", num: true, fmt: fmtBytes },
        { key: "max_size_bytes", label: "largest", num: true, fmt: fmtBytes }], { sortKey: "size_bytes" })));
  }

  async function host({ run, el }) {
    const [samples, counters] = await Promise.all([load("host_resources", run, {}), load("counters", run, {})]);
    const other = counters.filter(r => !String(r.name).startsWith("host_"));
    if (!samples.length && !other.length) {
      el.replaceChildren(h("h1", {}, "Host resources"), h("p", { class: "na-box", id: "no-host" },
        "No host samples in this run: collect with experimental_config host_sys=[\"cpu\", \"mem\", \"disk\", \"network\"] " +
        "(or `mlprof run --host-sys ...`), and the trace holds no other counters."));
      return;
    }
    const params = { run };
    const xs = samples.map(r => r.ts_ns);
    const series = (keys) => keys.filter(([k]) => samples.some(r => r[k] !== null && r[k] !== undefined))
      .map(([k, name]) => ({ name, xs, ys: samples.map(r => r[k]) }));
    const pct = v => `${Number(v).toFixed(0)} %`, rate = v => `${U.fmtBytes(v)}/s`;
    const byName = new Map();
    for (const r of other) {
      if (!byName.has(r.name)) byName.set(r.name, new Map());
      const key = `${r.series ?? r.name} (pid ${r.pid ?? "-"})`, m = byName.get(r.name);
      if (!m.has(key)) m.set(key, { name: key, xs: [], ys: [] });
      m.get(key).xs.push(r.ts_ns); m.get(key).ys.push(r.value);
    }
    el.replaceChildren(h("h1", {}, "Host resources"),
      ...(samples.length ? [
        h("p", { class: "muted" }, `${samples.length} samples of the host taken while the job ran.`),
        h("div", { class: "row" },
          card("CPU", "host_resources", params, Charts.lines(series([["cpu_percent", "system %"], ["job_cpu_percent", "job %"]]), { format: pct })),
          card("Memory", "host_resources", params, Charts.lines(series([["mem_used_bytes", "used"], ["mem_available_bytes", "available"], ["job_rss_bytes", "job RSS"]])))),
        h("div", { class: "row" },
          card("Disk", "host_resources", params, Charts.lines(series([["disk_read_bytes_per_s", "read"], ["disk_write_bytes_per_s", "write"]]), { format: rate })),
          card("Network", "host_resources", params, Charts.lines(series([["net_recv_bytes_per_s", "received"], ["net_sent_bytes_per_s", "sent"]]), { format: rate }))),
        card("Samples", "host_resources", params, DataTable(samples, [{ key: "step", label: "step", num: true },
          { key: "cpu_percent", label: "CPU %", num: true }, { key: "job_cpu_percent", label: "job CPU %", num: true },
          { key: "mem_used_bytes", label: "memory used", num: true, fmt: fmtBytes }, { key: "job_rss_bytes", label: "job RSS", num: true, fmt: fmtBytes },
          { key: "disk_read_bytes_per_s", label: "disk read/s", num: true, fmt: fmtBytes }, { key: "disk_write_bytes_per_s", label: "disk write/s", num: true, fmt: fmtBytes },
          { key: "net_recv_bytes_per_s", label: "net recv/s", num: true, fmt: fmtBytes }, { key: "net_sent_bytes_per_s", label: "net sent/s", num: true, fmt: fmtBytes }]))] : []),
      ...[...byName].map(([name, sr]) => card(name, "counters", params, Charts.lines([...sr.values()], { format: v => Number(v).toPrecision(4) }))));
  }

  async function comparePage(ctx) {
    const { run, el, query } = ctx;
    const runs = (await getJSON("/api/runs")).runs;
    const base = query.base || "";
    const pick = h("select", { id: "compare-base", onchange: e => ctx.go({ base: e.target.value }) },
      h("option", { value: "" }, "choose the base run…"),
      runs.filter(r => r.id !== run).map(r => h("option", { value: r.id, selected: r.id === base }, r.name)));
    el.replaceChildren(h("h1", {}, "Compare runs"),
      h("div", { class: "table-tools" }, h("label", {}, "base ", pick), h("span", { class: "muted" }, ` → new: ${run}`)));
    if (!base) { el.append(h("p", { class: "muted" }, runs.length > 1 ? "Choose the run to compare this one against." : "Only one run under this logdir: nothing to compare with.")); return; }
    let c;
    try { c = await getJSON(`/api/compare?${U.query({ run, base })}`); }
    catch (e) { el.append(h("p", { class: "na-box", id: "compare-error" }, e.message)); return; }
    const st = c.step_time, params = { run, base };
    const cls = d => d > 0 ? "delta-slower" : d < 0 ? "delta-faster" : "";
    const delta = (v, r) => h("span", { class: cls(v) }, (v > 0 ? "+" : "") + fmtNs(v) + (r.delta_pct === null ? "" : ` (${r.delta_pct > 0 ? "+" : ""}${r.delta_pct.toFixed(1)} %)`));
    const cols = (fmt) => [{ key: "name", label: "name" }, { key: "base_ns", label: "base", num: true, fmt },
      { key: "new_ns", label: "new", num: true, fmt }, { key: "delta_ns", label: "change", num: true, fmt: fmt === fmtNs ? delta : (v, r) => h("span", { class: cls(v) }, fmt(v)) },
      { key: "share_of_step_delta", label: "share of step change", num: true, fmt: v => v === null || v === undefined ? "" : (100 * v).toFixed(1) + " %" }];
    const section = (title, name, fmt = fmtNs) => card(title, `/api/compare/${name}`, params,
      c[name].length ? DataTable(c[name].map(d => ({ ...d, ...(d.detail || {}) })), cols(fmt), { sortKey: "delta_ns" }) : h("p", { class: "muted" }, "nothing to compare"));
    el.append(
      card("Step time", "/api/compare/summary", params, h("div", { id: "compare-summary" },
        h("div", { class: "big-number " + cls(st.delta_ns) }, `${st.delta_ns > 0 ? "+" : ""}${st.delta_pct === null ? "" : st.delta_pct.toFixed(1) + " %"}`),
        h("p", {}, `mean step ${fmtNs(st.base_ns)} → ${fmtNs(st.new_ns)} over ${c.steps} step(s) aligned by ${c.aligned_by}` +
          (c.speedup ? `; speedup ×${c.speedup.toFixed(3)}` : "")),
        c.verdict ? h("p", { id: "compare-verdict" }, `Median-based verdict: ${c.verdict.sentence}`) : null,
        (c.warnings || []).map(w => h("p", { class: "na-box compare-warning" }, `Warning: ${w}`)))),
      card("Aligned steps", "/api/compare/step_pairs", params, Charts.groupedBars(c.step_pairs.map(p => ({ label: `#${p.new_step}`, values: { base: p.base_ns, new: p.new_ns } })),
        [["base", "base"], ["new", "new"]])),
      section("Step breakdown (mean per step)", "breakdown"), section("Operator types", "op_types"), section("Operators by input shape", "ops"),
      section("Kernels", "kernels"), section("Memory peaks (bytes)", "memory", fmtBytes));
  }

  async function clusterPage({ run, el }) {
    const c = await getJSON(`/api/cluster?${U.query({ run })}`);
    if (!c.available) {
      el.replaceChildren(h("h1", {}, "Cluster"), h("p", { class: "na-box", id: "cluster-none" }, `Not a multi-rank job: ${c.reason}.`));
      return;
    }
    const params = { run }, rk = v => v === null || v === undefined ? "-" : String(v);
    const ranks = c.ranks.map(r => ({ ...r, label: `rank ${rk(r.rank)}` }));
    const matrixRanks = [...new Set(c.matrix.flatMap(m => [m.src_rank, m.dst_rank]))].sort((a, b) => a - b);
    const cell = new Map();
    for (const m of c.matrix) { const k = `${m.src_rank}>${m.dst_rank}`; cell.set(k, (cell.get(k) || 0) + (m.size_bytes || 0)); }
    const maxCell = Math.max(1, ...cell.values());
    const heat = matrixRanks.length ? h("table", { class: "data matrix", id: "cluster-matrix" },
      h("thead", {}, h("tr", {}, h("th", {}, "src \\ dst"), matrixRanks.map(r => h("th", { class: "num" }, r)))),
      h("tbody", {}, matrixRanks.map(src => h("tr", {}, h("th", {}, src), matrixRanks.map(dst => {
        const v = cell.get(`${src}>${dst}`);
        const td = h("td", { class: "num", title: v ? fmtBytes(v) : "" }, v ? fmtBytes(v) : "");
        if (v) td.style.background = `rgba(47,111,221,${(0.1 + 0.8 * v / maxCell).toFixed(2)})`;
        return td;
      }))))) : h("p", { class: "muted" }, "No communication with recorded group members.");
    el.replaceChildren(h("h1", {}, "Cluster"),
      h("p", { class: "muted" }, `${c.ranks.length} ranks: ${c.members.join(", ")}` + (c.failed.length ? `; ${c.failed.length} could not be read` : "")),
      card("Slow ranks", "/api/cluster/slow_ranks", params, c.slow_ranks.length ? h("ul", { class: "findings", id: "slow-ranks" }, c.slow_ranks.map(s =>
        h("li", { class: `sev-${s.severity}` }, h("span", { class: "sev" }, s.severity), " ",
          h("b", {}, `rank ${rk(s.rank)}: ${s.cause} ${fmtNs(s.value_ns)} per step`),
          ` vs ${fmtNs(s.median_ns)} on the others (+${fmtNs(s.excess_ns)}, ${(100 * s.share_of_step).toFixed(1)} % of a step)`)))
        : h("p", { class: "muted", id: "slow-ranks-none" }, "No rank is slower than the others by the advisor's threshold.")),
      card("Mean step per rank", "/api/cluster/ranks", params,
        Charts.stackedBars(ranks.map(r => ({ label: rk(r.rank), values: r })),
          [["compute_ns", "compute"], ["transit_ns", "communication (transit)"], ["wait_ns", "communication (wait)"], ["free_ns", "free"]]),
        DataTable(ranks, [{ key: "rank", label: "rank", num: true }, { key: "steps", label: "steps", num: true },
          { key: "step_ns", label: "step (ms)", num: true, fmt: ms }, { key: "compute_ns", label: "compute (ms)", num: true, fmt: ms },
          { key: "communication_ns", label: "communication (ms)", num: true, fmt: ms }, { key: "wait_ns", label: "wait (ms)", num: true, fmt: ms },
          { key: "transit_ns", label: "transit (ms)", num: true, fmt: ms }, { key: "free_ns", label: "free (ms)", num: true, fmt: ms },
          { key: "data_loading_ns", label: "data loading (ms)", num: true, fmt: ms }, { key: "source", label: "run", wide: true }], { sortKey: "rank", sortDir: 1 })),
      card("Communication per collective and rank", "/api/cluster/collectives", params, c.collectives.length ? DataTable(c.collectives, [
        { key: "collective", label: "collective" }, { key: "group", label: "group" }, { key: "rank", label: "rank", num: true },
        { key: "count", label: "count", num: true, fmt: num }, { key: "total_ns", label: "total (ms)", num: true, fmt: ms },
        { key: "wait_ns", label: "wait (ms)", num: true, fmt: ms }, { key: "transit_ns", label: "transit (ms)", num: true, fmt: ms },
        { key: "size_bytes", label: "bytes", num: true, fmt: fmtBytes }, { key: "bandwidth_gb_per_s", label: "GB/s", num: true, fmt: v => v === null ? "" : v.toFixed(2) }],
        { sortKey: "total_ns" }) : h("p", { class: "muted" }, "No communication ops.")),
      card("Communication matrix (bytes, source rank → destination rank)", "/api/cluster/matrix", params, heat),
      card("Steps per rank", "/api/cluster/step_rows", params, DataTable(c.step_rows, [{ key: "rank", label: "rank", num: true },
        { key: "step", label: "step", num: true }, { key: "dur_ns", label: "step (ms)", num: true, fmt: ms },
        { key: "compute_ns", label: "compute (ms)", num: true, fmt: ms }, { key: "communication_ns", label: "communication (ms)", num: true, fmt: ms },
        { key: "free_ns", label: "free (ms)", num: true, fmt: ms }], { sortKey: "rank", sortDir: 1 })));
  }

  function timelinePage(ctx) { Timeline.mount(ctx.el, ctx.run, ctx.query); }

  return {
    list: [["overview", "Overview", overview], ["operators", "Operators", operators], ["kernels", "Kernels", kernels],
      ["timeline", "Timeline", timelinePage], ["step_trace", "Step trace", stepTrace], ["data_loading", "Data loading", dataLoading],
      ["memory", "Memory", memory], ["host", "Host resources", host],
      ["compare", "Compare runs", comparePage], ["cluster", "Cluster", clusterPage]],
    unavailable: new Set(),
  };
})();
