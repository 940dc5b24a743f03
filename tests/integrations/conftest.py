"""Helpers for the trainer integration tests: real transformers / lightning runs on CPU, parsed."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

# Tiny models are built from configs: nothing may be downloaded.
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from mlprof.export import ExportOptions, run_exports  # noqa: E402
from mlprof.parse import ParseOptions, parse_path  # noqa: E402
from mlprof.tables.store import TableStore  # noqa: E402

# What every integration test switches off: the host sampler (a separate
# process) and stack sampling cost time on the shared 2-core machine and are
# tested elsewhere; the parse runs in the test, not in a child.
QUIET = {"analyse": False, "host_sys": "", "python_sampling": False}


def captures(root: Path) -> list[Path]:
    return sorted(p for p in Path(root).rglob("*_mlprof") if p.is_dir())


def window_steps(capture: Path) -> list[list[int]]:
    return [[s["step"] for s in json.loads((w / "steps.json").read_text())]
            for w in sorted((capture / "raw").glob("window_*"))]


def parse_capture(capture: Path, export_types=("text", "db")) -> TableStore:
    (result,) = parse_path(capture, ParseOptions())
    run_exports(Path(result.output_dir), ExportOptions(export_types=tuple(export_types)))
    return TableStore(result.tables_dir)


def host_phases(store: TableStore) -> dict[int, dict[str, int]]:
    """step -> {phase: ns} of the host view."""
    out: dict[int, dict[str, int]] = {}
    for step, phase, ns in store.rows("SELECT step, phase, sum(dur_ns) FROM phase_spans WHERE view = 'host' "
                                      "GROUP BY ALL"):
        out.setdefault(step, {})[phase] = int(ns)
    return out


def forward_share_of_module_time(store: TableStore) -> float:
    """Of the time outermost nn.Module forward calls ran, the share attributed to the forward phase."""
    (covered, total), = store.rows("""
        WITH calls AS (SELECT start_ns, end_ns FROM module_calls WHERE depth = 0 AND end_ns IS NOT NULL
                       AND step IS NOT NULL),
             fwd AS (SELECT start_ns, end_ns FROM phase_spans WHERE view = 'host' AND phase = 'forward')
        SELECT (SELECT coalesce(sum(greatest(0, least(c.end_ns, f.end_ns) - greatest(c.start_ns, f.start_ns))), 0)
                FROM calls c JOIN fwd f ON f.start_ns < c.end_ns AND f.end_ns > c.start_ns),
               (SELECT sum(end_ns - start_ns) FROM calls)""")
    return covered / total if total else 0.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def monitored_steps_and_windows(capture: Path) -> tuple[list[int], list[tuple]]:
    """A monitor-mode capture's step numbers (job_steps) and its opened windows (reason, first step)."""
    store = parse_capture(capture)
    try:
        steps = [r[0] for r in store.rows("SELECT step FROM job_steps ORDER BY step")]
        windows = store.rows("SELECT reason, first_step FROM monitor_windows WHERE skipped IS NULL")
    finally:
        store.close()
    return steps, windows
