"""Write a parse's tables and their attribution, both cores busy when that pays.

Writing the tables is DuckDB ``COPY``s, one after the other (host ops, on a
CPU trace of 1.1M events, 0.3 s of a 2 s parse), and the attribution is
mostly Python: one core each. So, with two cores and memory to spare, the
tables are written in a thread (DuckDB works without the GIL) while this
thread attributes the steps at once, reading every table from memory through
the very projection its file is written with
(:class:`mlprof.tables.store.TableStore` ``in_memory``). Otherwise the steps
run one after the other, as they must on one core: the overlap keeps every
column through the attribution, which a tight budget cannot afford.
"""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np

from mlprof.parse.attribution import DERIVED_TABLES, write_attribution
from mlprof.parse.release_memory import release_freed_memory
from mlprof.parse.workers import worker_count
from mlprof.tables.budget import memory_budget_bytes
from mlprof.tables.schema import TABLES
from mlprof.tables.store import table_bytes, write_tables

__all__ = ["write_tables_and_attribution"]

# Rows of the largest table per busy core: with two cores the tables are written beside the
# attribution from 200,000 rows on; a smaller one writes in about 0.1 s (1M host ops: 0.3 s).
_MIN_OVERLAP_ROWS = 100_000


def _rows(table: dict[str, np.ndarray]) -> int:
    return len(next(iter(table.values()), ()))


def _overlaps(columns: dict[str, dict[str, np.ndarray]], budget_bytes: int | None) -> bool:
    """Whether to write the tables beside the attribution (else one step after the other)."""
    if not columns:
        return False
    largest = max(columns.values(), key=table_bytes)
    if worker_count(_rows(largest), _MIN_OVERLAP_ROWS) < 2:
        return False
    # The overlap holds every column while the attribution runs: the parse's peak
    # came to 2.8x the columns at 1.1M events (346 MiB for 126), 1.9x at 4.5M
    # (964 MiB for 510), against 262 and 670 MiB one step after the other.
    held = sum(table_bytes(table) for table in columns.values())
    return 3 * held <= memory_budget_bytes(budget_bytes)


class _Writer(threading.Thread):
    """``write_tables`` in a thread; its error, if any, is raised by :meth:`result`."""

    def __init__(self, out_dir: Path, columns: dict[str, dict[str, np.ndarray]], strings: list[str],
                 budget_bytes: int | None, only: tuple[str, ...]) -> None:
        super().__init__(name="mlprof-write-tables", daemon=True)
        self._args = (out_dir, columns, strings, budget_bytes, only)
        self._error: BaseException | None = None

    def run(self) -> None:
        try:
            write_tables(*self._args)
        except BaseException as exc:  # re-raised in the parse's own thread
            self._error = exc
        finally:
            self._args = ()

    def result(self) -> None:
        self.join()
        if self._error is not None:
            raise self._error


def write_tables_and_attribution(out_dir: Path, columns: dict[str, dict[str, np.ndarray]], strings: list[str],
                                 budget_bytes: int | None = None) -> None:
    """Every table of ``columns`` and ``phase_spans`` into ``out_dir`` (``columns`` is consumed)."""
    if not _overlaps(columns, budget_bytes):
        write_tables(out_dir, columns, strings, budget_bytes)
        release_freed_memory()
        write_attribution(out_dir, budget_bytes)
        release_freed_memory()
        return
    out_dir.mkdir(parents=True, exist_ok=True)
    # Every table the attribution reads is in memory (an absent one reads empty), so it never
    # opens a file the writer is still writing; the writer leaves the attribution's own table alone.
    in_memory = {name: columns.get(name) or {} for name in TABLES if name not in DERIVED_TABLES}
    writer = _Writer(out_dir, columns, strings, budget_bytes, tuple(in_memory))
    writer.start()
    try:
        # In this process only: the other core is the writer's, and no fork while a thread is inside DuckDB.
        write_attribution(out_dir, budget_bytes, in_memory, strings, fork_workers=False)
    except BaseException:
        writer.join()  # nothing may still write into out_dir once the caller removes it; this error wins
        raise
    del in_memory
    writer.result()
    release_freed_memory()
