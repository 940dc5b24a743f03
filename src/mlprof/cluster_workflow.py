"""The path side of the cluster analysis: find every rank under a directory, parse it and extract its data.

:func:`extract_ranks` runs :func:`parse_and_extract` once per rank through the
batch runner (:func:`mlprof.batch.run_batch`: worker processes, or Dask
workers at a scheduler address). That worker function is module-level, so it
pickles, and this module imports little, so a spawned worker starts fast; only
the small per-rank data travels back. :func:`mlprof.workflow.cluster` then
combines it with :func:`mlprof.analysis.cluster.combine`, which only reads
that data.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from mlprof.analysis.cluster_data import extract_rank
from mlprof.batch import run_batch
from mlprof.outputs import input_sources, single_output
from mlprof.tables.layout import TABLES_DIR
from mlprof.tables.store import TableStore

__all__ = ["extract_ranks", "parse_and_extract", "rank_data"]


def parse_and_extract(source: str) -> dict:
    """Worker entry point: the data of one rank (``source``, a capture or trace), parsed first when it has no
    tables yet or stale ones."""
    out = single_output(Path(source))
    with out.open() as store:
        return extract_rank(store, source, out.output_dir)


def extract_ranks(paths: str | Path | Sequence[str | Path], workers: int | None = None,
                  scheduler: str | None = None) -> list[dict]:
    """Per-rank data of every capture/trace under ``paths`` (one directory or several; parsing those not
    parsed yet), in parallel; a rank found twice is read once.

    The batch runner's failure policy: a rank that fails is ``{"source", "error"}``, the others still read.
    When none could be read, the first one's error is raised (as ``mlprof parse`` does: its exit code,
    not "partial").
    """
    paths = [paths] if isinstance(paths, (str, Path)) else list(paths)
    sources = list(dict.fromkeys(source for path in paths for source, _ in input_sources(Path(path))))
    outcomes = run_batch(parse_and_extract, sources, workers=workers, scheduler=scheduler)
    if outcomes and all(o.error is not None for o in outcomes):
        raise outcomes[0].error
    return [o.value if o.error is None else {"source": o.item, "error": str(o.error)} for o in outcomes]


def rank_data(output_dir: str | Path, source: str | None = None) -> dict:
    """:func:`extract_rank` of an already parsed output directory (``source`` defaults to the directory)."""
    out = Path(output_dir)
    with TableStore(out / TABLES_DIR) as store:
        return extract_rank(store, source or str(out), out)
