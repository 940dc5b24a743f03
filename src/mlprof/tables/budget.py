"""The memory budget: what one parse, or one process reading parsed tables, aims to stay under.

``mlprof parse --memory-budget SIZE`` sets it for a parse; the
``MLPROF_MEMORY_BUDGET`` environment variable sets it for every command and
the dashboard; else it is 1 GiB. A process reading tables lets DuckDB hold
half of it for its joins, sorts and scans (:func:`query_memory_bytes`); past
that DuckDB spills to a private temporary directory instead of growing. By
default DuckDB takes up to 80% of the machine's memory: on a 4.5M-event run
``mlprof compare`` peaked at 1.4 GB and ``mlprof advise`` at 0.98 GB.
"""

from __future__ import annotations

import os

from mlprof.errors import ConfigError
from mlprof.settings.options import parse_size

__all__ = ["DEFAULT_MEMORY_BUDGET_BYTES", "MIN_MEMORY_BUDGET_BYTES", "MEMORY_BUDGET_ENV",
           "memory_budget_bytes", "query_memory_bytes"]

DEFAULT_MEMORY_BUDGET_BYTES = 2**30
MIN_MEMORY_BUDGET_BYTES = 64 * 2**20
MEMORY_BUDGET_ENV = "MLPROF_MEMORY_BUDGET"


def memory_budget_bytes(explicit: int | None = None) -> int:
    """The budget: ``explicit`` (a command's option), else the environment's, else 1 GiB."""
    if explicit is not None:
        return explicit
    text = os.environ.get(MEMORY_BUDGET_ENV, "").strip()
    if not text:
        return DEFAULT_MEMORY_BUDGET_BYTES
    size = parse_size(text)
    if size is None or size < MIN_MEMORY_BUDGET_BYTES:
        raise ConfigError(f"{MEMORY_BUDGET_ENV}={text!r} is not a memory size of at least 64M (e.g. 512M, 2G)")
    return size


def query_memory_bytes(explicit: int | None = None) -> int:
    """What DuckDB may hold while tables are read or written: half the budget (the rest is for the answers)."""
    return memory_budget_bytes(explicit) // 2
