"""Open TableStores of the runs, one per run, reopened when a parse rewrites them.

DuckDB connections are not safe to share between threads, and the ASGI server
answers requests from a thread pool, so each run's store is used under its own
lock. A re-parse swaps the ``tables/`` dir (new inode): the store is reopened
and its derived caches (the timeline index) are dropped with it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from mlprof.tables.store import TableStore
from mlprof.tables.layout import TABLES_DIR

__all__ = ["OpenRun", "StoreCache"]


@dataclass
class OpenRun:
    run_dir: Path
    signature: tuple[int, int]
    store: TableStore
    lock: threading.Lock = field(default_factory=threading.Lock)
    # Derived data computed once per open store (e.g. the timeline index).
    derived: dict[str, object] = field(default_factory=dict)


def _signature(tables_dir: Path) -> tuple[int, int]:
    st = tables_dir.stat()
    return st.st_ino, st.st_mtime_ns


class StoreCache:
    def __init__(self, max_open: int = 8) -> None:
        self._max_open = max_open
        self._open: dict[Path, OpenRun] = {}
        self._lock = threading.Lock()

    def _get(self, run_dir: Path) -> OpenRun:
        tables = run_dir / TABLES_DIR
        sig = _signature(tables)
        with self._lock:
            run = self._open.get(run_dir)
            if run is not None and run.signature == sig:
                self._open[run_dir] = self._open.pop(run_dir)  # most recently used last
                return run
            if run is not None:
                self._open.pop(run_dir)
                self._close_later(run)
            while len(self._open) >= self._max_open:
                oldest = next(iter(self._open))
                self._close_later(self._open.pop(oldest))
            run = OpenRun(run_dir=run_dir, signature=sig, store=TableStore(tables))
            self._open[run_dir] = run
            return run

    @staticmethod
    def _close_later(run: OpenRun) -> None:
        # A request may still be using it: close once its lock is free.
        def close() -> None:
            with run.lock:
                run.store.close()
        threading.Thread(target=close, daemon=True).start()

    @contextmanager
    def use(self, run_dir: Path) -> Iterator[OpenRun]:
        run = self._get(run_dir)
        with run.lock:
            yield run

    @contextmanager
    def use_two(self, first: Path, second: Path) -> Iterator[tuple[OpenRun, OpenRun]]:
        """Two runs at once (compare); locks taken in path order so two requests cannot deadlock."""
        if first == second:
            with self.use(first) as run:
                yield run, run
            return
        a, b = self._get(first), self._get(second)
        low, high = sorted((a, b), key=lambda r: str(r.run_dir))
        with low.lock, high.lock:
            yield a, b

    def close(self) -> None:
        with self._lock:
            for run in self._open.values():
                with run.lock:
                    run.store.close()
            self._open.clear()
