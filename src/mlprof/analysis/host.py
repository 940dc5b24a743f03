"""Host resources over time, from the counters the system sampler left (host_* groups)."""

from __future__ import annotations

from mlprof.tables.schema import HOST_COUNTERS
from mlprof.tables.store import TableStore

__all__ = ["host_resources"]


def host_resources(store: TableStore, step: int | None = None) -> list[dict]:
    """One row per sample time: system and job CPU, memory, disk and network; the step it fell in."""
    pivots = ", ".join(
        f"{'CAST(' if key.endswith('_bytes') else 'round('}max(c.value) FILTER "
        f"(WHERE c.name = '{name}' AND c.series = '{series}'){' AS BIGINT)' if key.endswith('_bytes') else ', 1)'} "
        f"AS {key}"
        for key, (name, series) in HOST_COUNTERS.items())
    rows = store.dicts(f"""
        SELECT c.ts_ns, (SELECT s.step FROM steps s WHERE c.ts_ns >= s.start_ns AND c.ts_ns < s.end_ns
                         ORDER BY s.start_ns LIMIT 1) AS step, {pivots}
        FROM counters c WHERE c.name LIKE 'host\\_%' ESCAPE '\\'
        GROUP BY c.ts_ns ORDER BY c.ts_ns""")
    return [r for r in rows if step is None or r["step"] == step]
