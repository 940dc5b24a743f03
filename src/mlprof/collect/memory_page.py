"""``export_memory_timeline("x.html")`` as a page that always renders, offline, without matplotlib.

torch's HTML export draws a PNG with matplotlib and writes nothing when
matplotlib is absent. This page draws the same data (torch's memory timeline:
times in µs and bytes per category) with the dashboard's chart library,
ECharts, inlined into the file: one self-contained HTML file that opens from
disk with no network, zoomable, with the category of every byte on hover.
It is written inside the profiled job (``prof.export_memory_timeline``), so
it lives with the collector and imports nothing of the later stages; only
the chart library's file is shared with the dashboard.
"""

from __future__ import annotations

import html
import json
from pathlib import Path

__all__ = ["memory_timeline_html", "TORCH_CATEGORIES"]

# torch.profiler._memory_profiler._CATEGORY_TO_COLORS order (the columns of ``sizes`` after the first).
TORCH_CATEGORIES = ("PARAMETER", "OPTIMIZER_STATE", "INPUT", "TEMPORARY", "ACTIVATION", "GRADIENT",
                    "AUTOGRAD_DETAIL", "Unknown")
_COLORS = {"PARAMETER": "#2e7d32", "OPTIMIZER_STATE": "#daa520", "INPUT": "#333333", "TEMPORARY": "#9370db",
           "ACTIVATION": "#e53935", "GRADIENT": "#1e40af", "AUTOGRAD_DETAIL": "#4169e1", "Unknown": "#9e9e9e"}
_ECHARTS = Path(__file__).parents[1] / "ui" / "static" / "echarts.min.js"

_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>body{{font:14px system-ui,sans-serif;margin:16px;color:#1d2330}}#chart{{width:100%;height:80vh}}
p{{color:#667085}}</style></head>
<body><h1 style="font-size:18px">{title}</h1><p>{summary}</p><div id="chart"></div>
<script>{echarts}</script>
<script>
const data = {data};
const chart = echarts.init(document.getElementById("chart"));
const unit = data.peak >= 2 ** 30 ? [2 ** 30, "GiB"] : data.peak >= 2 ** 20 ? [2 ** 20, "MiB"] : [2 ** 10, "KiB"];
chart.setOption({{
  animation: false, textStyle: {{fontSize: 12}},
  legend: {{top: 0}}, grid: {{left: 72, right: 24, top: 40, bottom: 80}},
  tooltip: {{trigger: "axis", valueFormatter: v => (v === null ? "" : v.toFixed(2) + " " + unit[1])}},
  dataZoom: [{{type: "inside"}}, {{type: "slider", bottom: 16}}],
  xAxis: {{type: "value", name: "time (ms)", nameLocation: "middle", nameGap: 28, min: "dataMin", max: "dataMax"}},
  yAxis: {{type: "value", name: "memory (" + unit[1] + ")", nameLocation: "middle", nameGap: 52}},
  series: data.categories.map((c, i) => ({{name: c, type: "line", stack: "memory", step: "end", symbol: "none",
    areaStyle: {{opacity: 0.75}}, lineStyle: {{width: 0}}, itemStyle: {{color: data.colors[i]}},
    data: data.times.map((t, j) => [t, data.sizes[j][i] / unit[0]])}})),
}});
addEventListener("resize", () => chart.resize());
</script></body></html>
"""


def memory_timeline_html(times_us: list[int], sizes: list[list[int]], device: str,
                         categories: tuple[str, ...] | list[str] = TORCH_CATEGORIES, title: str | None = None) -> str:
    """The page for torch's memory timeline of ``device``: ``times_us`` and, per time, bytes per category
    (``sizes[j][0]`` unused, then one column per category, as torch's ``_coalesce_timeline`` returns)."""
    t0 = min((t for t in times_us if t > 0), default=0)
    # Pre-existing allocations carry time -1: they are there from the start.
    times_ms = [max(t - t0, 0) / 1e3 for t in times_us]
    rows = [list(r[1:1 + len(categories)]) for r in sizes]
    keep = [i for i in range(len(categories)) if any(r[i] for r in rows)]
    totals = [sum(r) for r in rows]
    peak = max(totals, default=0)
    data = {"times": times_ms, "sizes": [[r[i] for i in keep] for r in rows], "categories": [categories[i] for i in keep],
            "colors": [_COLORS.get(categories[i], "#8a94a6") for i in keep], "peak": peak}
    name = title or f"Memory timeline ({device})"
    summary = (f"peak {peak / 2**20:.1f} MiB over {times_ms[-1] if times_ms else 0:.1f} ms; drag the slider or "
               "scroll to zoom; hover for bytes per category" if rows else "no memory events on this device")
    # </script> inside the data would end the script element: JSON escapes "/" here.
    return _PAGE.format(title=html.escape(name), summary=html.escape(summary), echarts=_ECHARTS.read_text(),
                        data=json.dumps(data).replace("</", "<\\/"))
