"""Names of mlprof's own events on a Chrome-trace timeline: one spelling for every writer.

Steps keep torch's name (``ProfilerStep#N``): the parser, Perfetto users and
torch's own tools find steps by it. GC pauses are ``GC gen N``.
Used by ``collect.chrome_events`` (``export_chrome_trace``), the timeline of
the web UI and, as SQL, by ``export.trace_view``.
"""

from __future__ import annotations

__all__ = ["STEP_EVENT_PREFIX", "step_event_name", "gc_event_name", "STEP_NAME_SQL", "GC_NAME_SQL"]

STEP_EVENT_PREFIX = "ProfilerStep#"
GC_EVENT_PREFIX = "GC gen "

# The same names as DuckDB expressions over the steps / gc_pauses tables.
STEP_NAME_SQL = f"'{STEP_EVENT_PREFIX}' || step"
GC_NAME_SQL = f"'{GC_EVENT_PREFIX}' || coalesce(generation, -1)"


def step_event_name(step: int) -> str:
    return f"{STEP_EVENT_PREFIX}{step}"


def gc_event_name(generation: int | None) -> str:
    return f"{GC_EVENT_PREFIX}{-1 if generation is None else generation}"
