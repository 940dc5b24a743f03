"use strict";
// Cluster: the ranks of this run's job side by side. Every rank links to its own run; bars open that
// rank's timeline at that step; the communication matrix covers NCCL (device) and gloo (host) jobs.
(() => {
  const { h, getJSON, card, fmtNs, fmtShare } = U;
  const rk = v => v === null || v === undefined ? "-" : String(v);

  async function clusterPage(ctx) {
    const { run, el } = ctx;
    const c = await getJSON(`/api/cluster?${U.query({ run })}`);
    if (!c.available) { U.fill(el, h("h1", {}, "Cluster"), U.naBox(`Not a multi-rank job: ${c.reason}.`, "cluster-none")); return; }
    const params = { run }, runOf = r => c.run_of_rank[String(r)];
    const rankLink = (r, page, q) => runOf(r) ? h("a", { href: U.runHref(runOf(r), page || "overview", q || {}), class: "rank-link", "data-rank": r }, `rank ${rk(r)}`) : `rank ${rk(r)}`;
    const ranks = c.ranks.map(r => ({ ...r, label: `rank ${rk(r.rank)}` }));
    // Steps x ranks: one bar per rank in each step.
    const stepNums = [...new Set(c.step_rows.map(s => s.step))].sort((a, b) => a - b);
    const perStep = stepNums.map(s => {
      const row = { label: `#${s}`, step: s };
      for (const x of c.step_rows.filter(x => x.step === s)) row[`r${x.rank}`] = x.dur_ns;
      return row;
    });
    // Many ranks: charts read the server's views (analysis.cluster_views): the slowest ranks, steps as the
    // spread across ranks, heatmaps of rank bands; the tables keep every rank.
    const v = c.views, many = ranks.length > 8;
    const rankSeries = ranks.map((r, i) => ({ key: `r${r.rank}`, name: r.label, color: U.PALETTE[i % 10] }));
    const shownRanks = v.slowest_ranks.map(r => ({ ...r, label: `rank ${rk(r.rank)}` }));
    const spread = v.step_spread.map(s => ({ ...s, label: `#${s.step}` }));
    const late = v.arrival_by_rank.filter(a => a.mean_late_ns > 0).slice().sort((a, b) => b.mean_late_ns - a.mean_late_ns).slice(0, 20)
      .map(a => ({ name: `rank ${rk(a.rank)}`, value: a.mean_late_ns, rank: a.rank, color: "#f28e2b",
        note: `last to arrive in ${a.last_count} of ${a.instances} collectives (${fmtShare(a.last_share)})` }));
    const lat = v.lateness, banded = lat.ranks_per_band > 1;
    const mx = v.matrix, haveBytes = mx.value === "size_bytes";
    const heatHeight = n => Math.max(240, Math.min(n, 24) * 28 + 90);
    const onHost = c.matrix.some(m => m.measured_on === "host");
    U.fill(el, h("h1", {}, "Cluster"),
      h("p", { id: "cluster-ranks" }, `${c.ranks.length} ranks: `, ranks.map((r, i) => [i ? ", " : "", rankLink(r.rank)]),
        c.failed.length ? ` (${c.failed.length} could not be read)` : "", c.warnings && c.warnings.length ? h("span", { class: "muted" }, ` — ${c.warnings.join("; ")}`) : null),
      card("Slow ranks", "/api/cluster/slow_ranks", params, c.slow_ranks.length ? h("ul", { class: "findings", id: "slow-ranks" }, c.slow_ranks.map(s =>
        h("li", { class: `sev-${s.severity}` }, h("span", { class: "sev" }, s.severity), " ", rankLink(s.rank),
          h("b", {}, `: ${s.measure || s.excess_in} ${fmtNs(s.value_ns)} per step`),
          ` vs ${fmtNs(s.median_ns)} on the others (+${fmtNs(s.excess_ns)}, ${fmtShare(s.share_of_step)} of a step)`,
          s.cause ? h("div", { class: "slow-cause" }, h("b", {}, `cause: ${s.cause_label}`), ` +${fmtNs(s.cause_ns)} per step`,
            s.cause_share_of_wait != null ? ` (${fmtShare(s.cause_share_of_wait)} of the others' wait)` : "",
            s.call_site ? ` at ${s.call_site}` : "", s.module ? ` in ${s.module}` : "") : null,
          s.also_in && s.also_in.length ? h("div", { class: "muted slow-also" }, "also slower in: ",
            s.also_in.map(a => `${a.excess_in} +${fmtNs(a.excess_ns)} per step`).join("; ")) : null)))
        : h("p", { class: "muted", id: "slow-ranks-none" }, "No rank is slower than the others by the advisor's threshold.")),
      h("div", { class: "row" },
        card(ranks.length > shownRanks.length ? `Mean step of the ${shownRanks.length} slowest of ${ranks.length} ranks, by step time less the wait for the others (click a rank for its run)`
          : "Mean step per rank (click a rank for its run)", "/api/cluster/ranks", params,
          Charts.bars(shownRanks, [{ key: "compute_ns", name: "compute", color: U.conceptColor("compute") },
            { key: "transit_ns", name: "communication (transit)", color: U.conceptColor("communication") },
            { key: "wait_ns", name: "communication (waiting for other ranks)", color: U.conceptColor("wait") },
            { key: "free_ns", name: "device idle", color: U.conceptColor("idle") }],
          { xName: "rank", yName: "time per step", onClick: r => { if (runOf(r.rank)) location.hash = U.runHref(runOf(r.rank), "overview"); } })),
        many ? card(`Step time per step across ${ranks.length} ranks (click a step for its slowest rank's timeline)`, "/api/cluster/step_rows", params,
          h("div", { id: "cluster-step-spread" }, Charts.bars(spread, [{ key: "min_ns", name: "fastest rank", color: "#9ecae9" },
            { key: "median_ns", name: "median rank", color: "#4e79a7" }, { key: "max_ns", name: "slowest rank", color: "#e15759" }],
          { stack: false, xName: "step", yName: "step time",
            onClick: r => { if (runOf(r.slowest_rank)) location.hash = U.timelineHref(runOf(r.slowest_rank), { step: r.step }); } })))
        : card("Step time per step and rank (click a bar for that rank's timeline)", "/api/cluster/step_rows", params,
          Charts.bars(perStep, rankSeries, { stack: false, xName: "step", yName: "step time",
            onClick: (r, p) => { const rank = ranks[p.seriesIndex]; if (rank && runOf(rank.rank)) location.hash = U.timelineHref(runOf(rank.rank), { step: r.step }); } }))),
      card("Who reaches collectives last: mean lateness behind the first rank (click a rank for its run)", "/api/cluster/arrivals", params,
        late.length ? h("div", { id: "cluster-arrivals" }, Charts.hbars(late, { xName: "lateness per collective",
          onClick: x => { if (runOf(x.rank)) location.hash = U.runHref(runOf(x.rank), "overview"); } }))
          : h("p", { class: "muted", id: "cluster-arrivals-none" }, "No collective was matched across ranks, or every rank reached each at once."),
        v.arrival_by_rank.length ? DataTable(v.arrival_by_rank, [{ key: "rank", label: "rank", num: true, fmt: x => rankLink(x) },
          { key: "instances", label: "collectives", kind: "count" }, { key: "last_count", label: "last to arrive", kind: "count" },
          { key: "last_share", label: "last (%)", kind: "share" }, { key: "mean_late_ns", label: "mean lateness", kind: "ns" }],
          { sortKey: "last_share", limit: 50 }) : null),
      lat.cells.length ? card(`Arrival lateness per step${banded ? ` and band of ${lat.ranks_per_band} ranks (the band's latest rank)` : " and rank"}: time behind the first rank to reach each collective, summed per step`,
        "/api/cluster/skew_rows", params, h("div", { id: "cluster-lateness" }, Charts.heatmap(lat.steps.map(x => `#${x}`), lat.bands, lat.cells,
          { kind: "ns", xName: "step", yName: "rank", left: 120, height: heatHeight(lat.bands.length),
            cellLabel: (x, y) => `step ${x}, ${y}: behind the first rank` }))) : null,
      card("Mean step per rank", "/api/cluster/ranks", params, DataTable(ranks, [
        { key: "rank", label: "rank", num: true, fmt: v => rankLink(v) }, { key: "steps", label: "steps", kind: "count" },
        { key: "step_ns", label: "step", kind: "ns" }, { key: "compute_ns", label: "compute", kind: "ns" },
        { key: "communication_ns", label: "communication", kind: "ns" }, { key: "wait_ns", label: "wait", kind: "ns" },
        { key: "transit_ns", label: "transit", kind: "ns" }, { key: "free_ns", label: "device idle", kind: "ns" },
        { key: "data_loading_ns", label: "data loading", kind: "ns" }], { sortKey: "rank", sortDir: 1 })),
      card(`Communication matrix (${haveBytes ? "bytes" : "time"}, source rank → destination rank${onHost ? "; host-side collectives, sizes from recorded input shapes" : ""})`,
        "/api/cluster/matrix", params, mx.cells.length ? h("div", { id: "cluster-matrix" }, Charts.heatmap(mx.labels, mx.labels, mx.cells,
          { kind: haveBytes ? "bytes" : "ns", xName: "destination", yName: "source", left: 120, height: heatHeight(mx.labels.length),
            cellLabel: (x, y) => `${y} → ${x}` }))
          : h("p", { class: "muted", id: "cluster-matrix-none" }, "No communication with known peers (record_shapes gives host collectives their sizes).")),
      card("Communication per collective and rank", "/api/cluster/collectives", params, c.collectives.length ? DataTable(c.collectives, [
        { key: "collective", label: "collective" }, { key: "group", label: "group" }, { key: "rank", label: "rank", num: true },
        { key: "count", label: "count", kind: "count" }, { key: "total_ns", label: "total", kind: "ns" },
        { key: "wait_ns", label: "wait", kind: "ns" }, { key: "transit_ns", label: "transit", kind: "ns" },
        { key: "size_bytes", label: "size", kind: "bytes" }, { key: "bandwidth_gb_per_s", label: "GB/s", num: true, fmt: v => v === null || v === undefined ? "" : v.toFixed(2) }],
        { sortKey: "total_ns" }) : h("p", { class: "muted" }, "No communication ops."),
        c.collectives.some(r => r.size_bytes === null || r.size_bytes === undefined) ? h("p", { class: "muted", id: "cluster-sizes-unknown" },
          "Size and GB/s are blank where the trace records no message sizes: NCCL collectives carry them in Kineto's collective " +
          "metadata (In msg nelems, dtype; torch 2.1 and later), gloo ones in their recorded input shapes (record_shapes=True).") : null),
      card("Steps per rank", "/api/cluster/step_rows", params, DataTable(c.step_rows, [{ key: "rank", label: "rank", num: true, fmt: v => rankLink(v) },
        { key: "step", label: "step", num: true }, { key: "dur_ns", label: "step", kind: "ns" },
        { key: "compute_ns", label: "compute", kind: "ns" }, { key: "communication_ns", label: "communication", kind: "ns" },
        { key: "free_ns", label: "device idle", kind: "ns" },
        { key: "open", label: "", fmt: (v, r) => runOf(r.rank) ? h("a", { href: U.timelineHref(runOf(r.rank), { step: r.step }), class: "tl-link" }, "timeline") : "" }],
        { sortKey: "rank", sortDir: 1 })));
  }

  U.page("cluster", "Cluster", clusterPage);
})();
