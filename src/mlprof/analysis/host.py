"""Host resources over time, from the counters the system sampler left (host_* groups)."""

from __future__ import annotations


from mlprof.tables.schema import HOST_COUNTERS, HOST_JOB_PROCESSES_COUNTER, HOST_TOP_PROCESSES_COUNTER
from mlprof.tables.store import TableStore

__all__ = ["host_resources", "step_host_load", "training_pid", "training_cpu_percent", "cpu_demand_percent",
           "is_starved", "STARVED_SHARE", "step_cpu_waits", "step_cpu_waits_by_step", "measured_wait_share"]

# Below this fraction of the CPU its threads could use, the training process waited for a core. The advisor's
# cpu_contention and compare's load-aware verdict both judge "starved" by it.
STARVED_SHARE = 0.8


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
                GROUP BY series, pid ORDER BY cpu_percent DESC, series, pid LIMIT 5""",
                [lo if lo is not None else hi - 1, hi])
        row.pop("to_ns")
    return rows


def training_pid(store: TableStore) -> int | None:
    """The training process's pid (``capture.pid``), None when the capture does not say."""
    pid = store.meta("capture.pid")
    try:
        return None if pid is None else int(pid)
    except (TypeError, ValueError):
        return None


def training_cpu_percent(load_row: dict, pid: int | None) -> float | None:
    """CPU (% of one core) the training process got in one ``step_host_load`` row: its own entry among the
    job's processes, else the whole job's (older captures, or a job of one process)."""
    mine = [p["cpu_percent"] for p in load_row.get("job_processes") or [] if p["pid"] == pid]
    return mine[0] if mine else load_row.get("job_cpu_percent")


def cpu_demand_percent(store: TableStore, load: list[dict]) -> float | None:
    """What the training process's threads could use: min(torch threads, cores) x 100 (None without cores)."""
    system = store.meta("profiler_metadata.system")
    try:
        threads = int(system["torch_num_threads"]) if isinstance(system, dict) else None
    except (KeyError, TypeError, ValueError):
        threads = None
    cores = max((int(r["cpu_count"]) for r in load if r.get("cpu_count")), default=None)
    if not cores:
        return None
    return min(threads if threads and threads > 0 else cores, cores) * 100.0


def is_starved(training_percent: float, demand_percent: float | None) -> bool:
    return bool(demand_percent) and training_percent < STARVED_SHARE * demand_percent


def step_cpu_waits_by_step(store: TableStore) -> dict[tuple[int, int | None], tuple[int, int]] | None:
    """(window, step) -> (duration, time its thread waited for a CPU core), ns, in step order.

    Measured by `mlprof run` at every step boundary (``steps.cpu_wait_ns``, the kernel's run-queue
    delay of the thread that steps); None unless every step has it (older captures, plain traces).
    """
    rows = store.rows("SELECT window_index, step, dur_ns, cpu_wait_ns FROM steps ORDER BY window_index, step")
    if not rows or any(wait is None or not dur for *_, dur, wait in rows):
        return None
    return {(window, step): (dur, min(max(wait, 0), dur)) for window, step, dur, wait in rows}


def step_cpu_waits(store: TableStore) -> list[tuple[int, int]] | None:
    """Per step (in order): its duration and its measured wait for a CPU core, ns (see step_cpu_waits_by_step)."""
    by_step = step_cpu_waits_by_step(store)
    return list(by_step.values()) if by_step else None


def measured_wait_share(store: TableStore) -> float | None:
    """The share of step time the stepping thread spent ready to run with no core free (None: not measured)."""
    waits = step_cpu_waits(store)
    if not waits:
        return None
    return sum(w for _, w in waits) / sum(d for d, _ in waits)
