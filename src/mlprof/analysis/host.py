"""Host resources over time, from the counters the system sampler left (host_* groups)."""

from __future__ import annotations

from mlprof.tables.schema import HOST_COUNTERS, HOST_JOB_PROCESSES_COUNTER, HOST_TOP_PROCESSES_COUNTER
from mlprof.tables.store import TableStore

__all__ = ["host_resources", "step_host_load"]


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


def step_host_load(store: TableStore) -> list[dict]:
    """Per step: the job's and the system's CPU use, runnable threads vs cores, the busiest other processes.

    A host sample at ``ts`` measures the interval since the previous sample,
    so a step is joined with every sample whose interval overlaps it.
    """
    rows = store.dicts("""
        WITH samples AS (
            SELECT ts_ns, lag(ts_ns) OVER (ORDER BY ts_ns) AS prev_ns,
                   max(value) FILTER (WHERE name = 'host_cpu' AND series = 'job_percent') AS job_cpu_percent,
                   max(value) FILTER (WHERE name = 'host_cpu' AND series = 'system_percent') AS system_cpu_percent,
                   max(value) FILTER (WHERE name = 'host_cpu' AND series = 'cpu_count') AS cpu_count,
                   max(value) FILTER (WHERE name = 'host_cpu' AND series = 'runnable_threads') AS runnable_threads,
                   max(value) FILTER (WHERE name = 'host_cpu' AND series = 'job_threads') AS job_threads
            FROM counters WHERE name = 'host_cpu' GROUP BY ts_ns),
        joined AS (
            SELECT s.window_index, s.step, s.start_ns, s.end_ns, x.*
            FROM steps s JOIN samples x ON x.ts_ns > s.start_ns AND coalesce(x.prev_ns, x.ts_ns - 1) < s.end_ns)
        SELECT window_index AS window, step, count(*) AS samples, min(prev_ns) AS from_ns, max(ts_ns) AS to_ns,
               avg(job_cpu_percent) AS job_cpu_percent, avg(system_cpu_percent) AS system_cpu_percent,
               max(cpu_count) AS cpu_count, avg(runnable_threads) AS runnable_threads,
               avg(job_threads) AS job_threads
        FROM joined GROUP BY window_index, step ORDER BY window_index, step""")
    for row in rows:
        lo, hi = row.pop("from_ns"), row["to_ns"]
        for key, counter in (("top_processes", HOST_TOP_PROCESSES_COUNTER),
                             ("job_processes", HOST_JOB_PROCESSES_COUNTER)):
            row[key] = store.dicts(f"""
                SELECT series AS name, pid, avg(value) AS cpu_percent FROM counters
                WHERE name = '{counter}' AND ts_ns > ? AND ts_ns <= ?
                GROUP BY series, pid ORDER BY cpu_percent DESC LIMIT 5""", [lo if lo is not None else hi - 1, hi])
        row.pop("to_ns")
    return rows
