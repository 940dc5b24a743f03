"use strict";
// Whole job (monitor mode): every step of the job, drawn from the server's buckets of steps (a job of
// millions of steps is at most analysis.monitor.SERIES_POINTS points), the windows monitor mode opened
// shaded; a click on a window (or its row) picks its first step for every page and opens the step trace.
(() => {
  const { h, getRows, dataUrl, card, fmtNs } = U;

  async function wholeJob(ctx) {
    const { run, el } = ctx;
    const [points, windows] = await Promise.all([getRows(dataUrl("job_steps", { run })).then(x => x.rows),
      getRows(dataUrl("monitor_windows", { run })).then(x => x.rows)]);
    const opened = windows.filter(w => w.window !== null && w.window !== undefined);
    const steps = points.reduce((a, p) => a + p.steps, 0);
    const perPoint = points.length ? Math.max(...points.map(p => p.last_step - p.first_step + 1)) : 1;
    const openWindow = w => ctx.go({ step: w.first_step }, "step_trace");
    const slowest = points.reduce((a, p) => (a && a.max_ns >= p.max_ns ? a : p), null);
    U.fill(el, h("h1", {}, "Whole job"),
      h("p", { class: "muted" }, "Monitor mode times every step of the job and opens a detailed window where steps turn slow. ",
        "Click a shaded window (or a row below) to follow its first step on every page."),
      U.tiles([["steps monitored", String(steps), perPoint > 1 ? `drawn as ${points.length} points of up to ${perPoint} steps` : "one point per step", "job-steps"],
        ["windows opened", String(opened.length), windows.length > opened.length ? `${windows.length - opened.length} trigger(s) with no window left` : "baseline and triggers", "job-windows"],
        slowest ? ["slowest step", fmtNs(slowest.max_ns), `in steps ${slowest.first_step}-${slowest.last_step}`, "job-slowest"] : null]),
      card("Step time over the whole job (median and slowest step per point; windows shaded)", "job_steps", { run },
        h("div", { id: "job-steps-chart" }, Charts.jobSteps(points, opened, { onWindow: openWindow }))),
      card("Windows and triggers", "monitor_windows", { run }, DataTable(windows, [
        { key: "window", label: "window", num: true }, { key: "reason", label: "trigger" }, { key: "detail", label: "what it saw" },
        { key: "trigger_step", label: "after step", num: true }, { key: "first_step", label: "first step", num: true },
        { key: "last_step", label: "last step", num: true }, { key: "skipped", label: "no window because" },
        { key: "open", label: "", fmt: (v, r) => r.window === null || r.window === undefined ? ""
          : h("a", { href: U.runHref(run, "step_trace", { step: r.first_step }), class: "window-link", "data-window": r.window }, "its steps") }],
        { sortKey: "trigger_step", sortDir: 1 })));
  }

  U.page("whole_job", "Whole job", wholeJob);
})();
