"use strict";
// Memory (per device: a zoomable allocated/reserved curve whose selected range filters the allocation
// tables) and host resources (the sampler's series, with the captured steps marked: the sampler runs
// for the whole job, the profiler only for its window).
(() => {
  const { h, getRows, dataUrl, card, fmtNs, fmtBytes } = U;
  const load = (name, run, extra) => getRows(dataUrl(name, { run, ...extra }));

  // Absolute ns (strings: beyond a JS number's precision) from an origin and an offset in ns.
  const absNs = (origin, offset) => (BigInt(origin) + BigInt(Math.round(offset))).toString();

  async function memory(ctx) {
    const { run, el, step, query } = ctx;
    const { rows: peak } = await load("memory_peak", run, { step });
    if (!peak.length) { U.fill(el, h("h1", {}, "Memory"), U.naBox("No allocator events in this run: profile with profile_memory=True.", "no-memory")); return; }
    const dev = peak.find(p => p.device_key === query.device) || peak.slice().sort((a, b) => (b.device_type !== 0) - (a.device_type !== 0)
      || b.peak_allocated_bytes - a.peak_allocated_bytes)[0];
    const { rows: curve } = await load("memory_timeline", run, { step, device: dev.device_key });
    const origin = curve.length ? String(curve[0].ts_ns) : "0";
    const o = Number(origin);
    const xs = curve.map(r => r.ts_ns - o);
    const tables = h("div", { id: "memory-range" });
    let timer = null, range = null;
    const showRange = async (t0, t1) => {
      range = t0 === null ? null : [t0, t1];
      const params = { step, device: dev.device_key, ...(range ? { t0: absNs(origin, t0), t1: absNs(origin, t1) } : {}) };
      const [{ rows, total }, { rows: byOp }] = await Promise.all([load("allocations", run, params), load("memory_by_op", run, params)]);
      const where = range ? `allocations made between ${fmtNs(t0)} and ${fmtNs(t1)} after the first sample` : "every allocation";
      U.fill(tables, h("p", { class: "muted", id: "memory-range-info" }, `Showing ${where} on ${dev.device} (${total.toLocaleString("en-US")} allocations).`),
        h("div", {},
          card("Allocations by operator", "memory_by_op", { run, ...params }, DataTable(byOp, [{ key: "op_name", label: "operator", wide: true },
            { key: "allocations", label: "allocations", kind: "count" }, { key: "size_bytes", label: "allocated", kind: "bytes" },
            { key: "max_size_bytes", label: "largest", kind: "bytes" }], { sortKey: "size_bytes" })),
          card("Largest allocations", "allocations", { run, ...params }, DataTable(rows.map(r => ({ ...r, at_ns: r.alloc_ns - o })), [
            { key: "op_name", label: "operator", wide: true }, { key: "size_bytes", label: "size", kind: "bytes" },
            { key: "at_ns", label: "at", kind: "ns" }, { key: "lifetime_ns", label: "lifetime", kind: "ns" },
            { key: "total_allocated_bytes", label: "allocated after", kind: "bytes" }, { key: "step", label: "step", num: true },
            { key: "open", label: "", fmt: (v, r) => r.host_op_id === null ? "" : h("a", { href: U.timelineHref(run, { src: 0, id: r.host_op_id }), class: "tl-link" }, "timeline") }],
            { sortKey: "size_bytes", total, cutBy: "largest first" }))));
    };
    const onRange = (t0, t1) => {
      clearTimeout(timer);
      const full = t0 <= xs[0] && t1 >= xs[xs.length - 1];
      timer = setTimeout(() => showRange(full ? null : t0, full ? null : t1), 250);
    };
    const tabs = peak.length > 1 ? h("div", { class: "tabs", id: "memory-devices" }, peak.map(p => h("a", {
      href: U.runHref(run, "memory", { ...query, device: p.device_key }), class: p === dev ? "on" : null }, p.device))) : null;
    U.fill(el, h("h1", {}, "Memory", step !== null ? h("span", { class: "muted" }, ` · step ${step}`) : null), tabs,
      U.tiles([["device", dev.device], ["peak allocated", fmtBytes(dev.peak_allocated_bytes), `at ${fmtNs(Number(dev.peak_ts_ns) - o)}`],
        ["peak reserved", dev.peak_reserved_bytes ? fmtBytes(dev.peak_reserved_bytes) : "—"], ["allocations", U.fmtNum(dev.allocations)]]),
      card(`Memory over time on ${dev.device} (drag the slider or scroll on the chart to select a range)`, "memory_timeline", { run, step, device: dev.device_key },
        Charts.lines([{ name: "allocated", xs, ys: curve.map(r => r.allocated_bytes), color: "#4e79a7" },
          ...(curve.some(r => r.reserved_bytes) ? [{ name: "reserved", xs, ys: curve.map(r => r.reserved_bytes), color: "#f28e2b" }] : [])],
        { kind: "bytes", yName: "memory", xName: "time since the first sample", zoom: true, onRange, height: 320 })),
      tables,
      card("Peak per device", "memory_peak", { run, step }, DataTable(peak, [{ key: "device", label: "device" },
        { key: "peak_allocated_bytes", label: "peak allocated", kind: "bytes" },
        ...(peak.some(p => p.peak_reserved_bytes) ? [{ key: "peak_reserved_bytes", label: "peak reserved", kind: "bytes" }] : []),
        { key: "allocations", label: "allocations", kind: "count" }, { key: "allocated_bytes_total", label: "allocated in total", kind: "bytes" }])));
    await showRange(null, null);
  }

  async function host(ctx) {
    const { run, el } = ctx;
    const [{ rows: samples }, { rows: counters }, { rows: steps }] = await Promise.all([
      load("host_resources", run, {}), load("counters", run, {}), load("steps", run, {})]);
    const all = [...samples.map(r => r.ts_ns), ...counters.map(r => r.ts_ns)];
    const o = Math.min(...all);
    const band = steps.length ? { start: Math.min(...steps.map(s => s.start_ns)) - o, end: Math.max(...steps.map(s => s.end_ns)) - o,
      label: `captured steps ${steps[0].step}–${steps[steps.length - 1].step}` } : null;
    const xs = samples.map(r => r.ts_ns - o);
    const series = keys => keys.filter(([k]) => samples.some(r => r[k] !== null && r[k] !== undefined))
      .map(([k, name], i) => ({ name, xs, ys: samples.map(r => r[k]), color: U.PALETTE[i] }));
    const chart = (title, keys, kind, yName) => {
      const s = series(keys);
      return s.length ? card(title, "host_resources", { run }, Charts.lines(s, { kind, yName, band, xName: "time since the first sample" })) : null;
    };
    // Other counters (device samplers, trace counters), one chart per counter name, in their own unit.
    const byName = new Map();
    const sampled = new Set(["host_cpu", "host_memory", "host_disk", "host_network"]);  // drawn above from host_resources
    for (const r of counters.filter(r => !sampled.has(r.name))) {
      const key = `${r.name}`;
      if (!byName.has(key)) byName.set(key, new Map());
      // "Busiest other processes: python" in a card titled "Busiest other processes": the series is "python (pid N)".
      const [title, part] = r.label.includes(": ") ? r.label.split(/: (.*)/s) : [r.label, r.label];
      const pid = r.name === "host_top_processes" && r.pid !== null && r.pid !== undefined ? ` (pid ${r.pid})` : "";
      const skey = `${part}${pid}`, m = byName.get(key);
      if (!m.has(skey)) m.set(skey, { name: skey, title, unit: r.unit, xs: [], ys: [] });
      m.get(skey).xs.push(r.ts_ns - o); m.get(skey).ys.push(r.value);
    }
    U.fill(el, h("h1", {}, "Host resources"),
      samples.length ? h("p", { class: "muted" }, `${samples.length} samples of the host while the job ran; the shaded band is the profiler's captured steps.`) : null,
      samples.length ? h("div", { class: "row" },
        chart("CPU", [["cpu_percent", "system"], ["job_cpu_percent", "this job"]], "percent", "CPU"),
        chart("Memory", [["mem_used_bytes", "used"], ["mem_available_bytes", "available"], ["job_rss_bytes", "job RSS"]], "bytes", "memory")) : null,
      samples.length ? h("div", { class: "row" },
        chart("Disk", [["disk_read_bytes_per_s", "read"], ["disk_write_bytes_per_s", "write"]], "bytes_per_s", "throughput"),
        chart("Network", [["net_recv_bytes_per_s", "received"], ["net_sent_bytes_per_s", "sent"]], "bytes_per_s", "throughput")) : null,
      // Two per row: a device sampler can have dozens of counters.
      byName.size ? h("div", { class: "row", id: "other-counters" }, [...byName].map(([name, sr]) => {
        const list = [...sr.values()], unit = list[0].unit;
        return card(list[0].title, "counters", { run }, Charts.lines(list.map((s, i) => ({ ...s, color: U.PALETTE[i % 10] })),
          { kind: unit || "", yName: "value", band, xName: "time since the first sample", height: 220 }));
      })) : null,
      samples.length ? card("Samples", "host_resources", { run }, DataTable(samples.map(r => ({ ...r, at_ns: r.ts_ns - o })), [
        { key: "at_ns", label: "at", kind: "ns" }, { key: "step", label: "step", num: true },
        { key: "cpu_percent", label: "CPU %", kind: "pct" }, { key: "job_cpu_percent", label: "job CPU %", kind: "pct" },
        { key: "mem_used_bytes", label: "memory used", kind: "bytes" }, { key: "job_rss_bytes", label: "job RSS", kind: "bytes" },
        { key: "disk_read_bytes_per_s", label: "disk read", kind: "bytes_per_s" }, { key: "disk_write_bytes_per_s", label: "disk write", kind: "bytes_per_s" },
        { key: "net_recv_bytes_per_s", label: "net received", kind: "bytes_per_s" }, { key: "net_sent_bytes_per_s", label: "net sent", kind: "bytes_per_s" }],
        { sortKey: "at_ns", sortDir: 1 })) : null);
  }

  U.page("memory", "Memory", memory);
  U.page("host", "Host resources", host);
})();
