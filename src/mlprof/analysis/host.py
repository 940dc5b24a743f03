"""Host resources over time, from the counters the system sampler left (host_* groups)."""

from __future__ import annotations

from mlprof.tables.store import TableStore

__all__ = ["host_resources", "HOST_SERIES"]

# output key -> (counter name, series)
HOST_SERIES = {
    "cpu_percent": ("host_cpu", "system_percent"),
    "job_cpu_percent": ("host_cpu", "job_percent"),
    "mem_used_bytes": ("host_memory", "used_bytes"),
    "mem_available_bytes": ("host_memory", "available_bytes"),
    "job_rss_bytes": ("host_memory", "job_rss_bytes"),
    "disk_read_bytes_per_s": ("host_disk", "read_bytes_per_s"),
    "disk_write_bytes_per_s": ("host_disk", "write_bytes_per_s"),
    "net_recv_bytes_per_s": ("host_network", "recv_bytes_per_s"),
    "net_sent_bytes_per_s": ("host_network", "sent_bytes_per_s"),
}


def host_resources(store: TableStore, step: int | None = None) -> list[dict]:
    """One row per sample time: system and job CPU, memory, disk and network; the step it fell in."""
    pivots = ", ".join(
        f"{'CAST(' if key.endswith('_bytes') else 'round('}max(c.value) FILTER "
        f"(WHERE c.name = '{name}' AND c.series = '{series}'){' AS BIGINT)' if key.endswith('_bytes') else ', 1)'} "
        f"AS {key}"
        for key, (name, series) in HOST_SERIES.items())
    rows = store.dicts(f"""
        SELECT c.ts_ns, (SELECT s.step FROM steps s WHERE c.ts_ns >= s.start_ns AND c.ts_ns < s.end_ns
                         ORDER BY s.start_ns LIMIT 1) AS step, {pivots}
        FROM counters c WHERE c.name LIKE 'host\\_%' ESCAPE '\\'
        GROUP BY c.ts_ns ORDER BY c.ts_ns""")
    return [r for r in rows if step is None or r["step"] == step]
