"""The path-taking conveniences, above parsing and analysis: ``mlprof.advise(path)`` and friends.

Each takes what a user has at hand (a capture directory, a directory of
captures, a trace file or a parsed output directory), gets its parsed
outputs from :mod:`mlprof.outputs` (parsing inputs that have none yet or
stale ones: the only writing done here), then calls the analyses, which
take a :class:`~mlprof.tables.store.TableStore` and only read. The cluster's
per-rank parsing and extraction, run in worker processes, is in
:mod:`mlprof.cluster_workflow`.

    import mlprof
    mlprof.op_analyse("result/host_..._mlprof", ["aten::conv2d"])
    for report in mlprof.advise("result"): ...
    mlprof.compare("runs/before", "runs/after").speedup
    mlprof.cluster("result", workers=4).slow_ranks
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import ExitStack
from pathlib import Path

import json

from mlprof.analysis.advisor import AdvisorReport, Finding, Thresholds, advise_jobs, rank_advice
from mlprof.analysis.cluster import ClusterReport, combine
from mlprof.analysis.compare import Comparison
from mlprof.analysis.compare import compare as compare_stores
from mlprof.analysis.op_analyse import op_analysis
from mlprof.cluster_workflow import extract_ranks
from mlprof.capture.files import atomic_write
from mlprof.errors import ConfigError, MlprofError
from mlprof.outputs import parsed_outputs, single_output
from mlprof.tables.layout import TABLES_DIR
from mlprof.tables.store import TableStore

# The public API (re-exported by mlprof); advise_outputs, advice_entry and ADVISOR_FILE are the CLI's.
__all__ = ["advise", "op_analyse", "compare", "cluster", "Thresholds", "Finding", "AdvisorReport", "Comparison",
           "ClusterReport"]

# The advisor's report, written beside the tables by `mlprof advise`.
ADVISOR_FILE = "advisor.json"


def advise_outputs(outputs: Sequence[tuple[str, Path]], thresholds: Thresholds | None = None) -> list[AdvisorReport]:
    """The advisor's report for each (source, parsed output dir), ranks of one job judged together
    (:func:`mlprof.analysis.advisor.advise_jobs`)."""
    ranks = []
    for source, out in outputs:
        with TableStore(Path(out) / TABLES_DIR) as store:
            # A job has two ranks or more: a lone output is never part of one.
            ranks.append(rank_advice(store, str(source), Path(out), thresholds, in_job=len(outputs) > 1))
    return advise_jobs(ranks, thresholds)


def advice_entry(output_dir: Path, report: AdvisorReport, write: bool = False) -> dict:
    """The report as ``advisor.json`` holds it (with ``output_dir``); written into ``output_dir`` when ``write``."""
    entry = {**report.to_dict(), "output_dir": str(output_dir)}
    if not write:
        return entry
    try:
        atomic_write(Path(output_dir) / ADVISOR_FILE, json.dumps(entry, indent=2, default=str))
    except OSError as exc:
        raise MlprofError(f"{Path(output_dir) / ADVISOR_FILE}: cannot write ({exc.strerror or exc}); "
                          "use --no-write to only print") from None
    return entry


def advise(path: str | Path, thresholds: Thresholds | None = None) -> list[AdvisorReport]:
    """The advisor's report for every capture or trace under ``path``."""
    return advise_outputs([(o.source, o.output_dir) for o in parsed_outputs(Path(path))], thresholds)


def op_analyse(path: str | Path, names: list[str] | str) -> dict[str, list[dict]]:
    """JSON-ready groups by input shape for each op in ``names`` (``{name: [group, ...]}``, times in ns)."""
    with single_output(Path(path)).open() as store:
        return {name: [g.to_dict() for g in groups] for name, groups in op_analysis(store, names).items()}


def compare(base: str | Path, new: str | Path, top: int | None = None) -> Comparison:
    """What got faster or slower from ``base`` to ``new``: each a capture or trace, or a directory of
    repeated runs of the same code (the verdict then rests on the spread between runs)."""
    sides = []
    for path in (Path(base), Path(new)):
        sides.append(repeated_runs(path, [(o.source, o.output_dir) for o in parsed_outputs(path)]))
    with ExitStack() as stack:
        stores = [[stack.enter_context(TableStore(out / TABLES_DIR)) for _, out in side] for side in sides]
        return compare_stores(stores[0], stores[1], top)


def repeated_runs(path: Path, outputs: list[tuple[str, Path]]) -> list[tuple[str, Path]]:
    """``outputs`` found under ``path`` as one side of a comparison: one run, or several runs of the same
    code; refused when they are the ranks of one distributed job (that is `mlprof cluster`'s)."""
    if not outputs:
        raise ConfigError(f"{path}: no capture or trace found")
    if len(outputs) > 1:
        from mlprof.analysis.jobs import group_jobs, run_identity

        identities = []
        for source, out in outputs:
            with TableStore(out / TABLES_DIR) as store:
                identities.append(run_identity(store, source))
        if any(len(job) > 1 for job in group_jobs(identities).jobs):
            raise ConfigError(f"{path}: holds ranks of one distributed job, not repeated runs: give one rank's "
                              "capture per side, or use `mlprof cluster`")
    return outputs


def cluster(path: str | Path | Sequence[str | Path], workers: int | None = None, scheduler: str | None = None,
            thresholds: Thresholds | None = None) -> ClusterReport:
    """Every rank under ``path`` (a directory, or several): parsed and reduced in parallel (processes, or Dask
    at ``scheduler``), combined.

    A rank that fails is listed in ``failed``; the others are still analysed.
    """
    if workers is not None and workers < 1:
        raise ConfigError(f"cluster: workers must be >= 1, got {workers}")
    return combine(extract_ranks(path, workers, scheduler), thresholds)
