"""Finds the runs under a log directory: parsed outputs (a ``tables/`` dir).

A run is an output directory written by ``mlprof parse``: a capture's
``mlprof_output/`` or a trace's ``<name>_mlprof_output/``. Its id is its path
relative to the logdir, so ids are stable across restarts and readable in URLs.
Captures and traces not parsed yet are listed apart: the dashboard is
read-only and never parses (that would write into the user's directories).
The walk is bounded in depth and entries, and never follows symlinks.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from pathlib import Path

from mlprof.capture.layout import INFO_FILE, OUTPUT_DIR, RAW_DIR
from mlprof.errors import ConfigError
from mlprof.outputs import read_parse_info
from mlprof.parse.ascend_common import is_ascend_dir
from mlprof.tables.layout import TABLES_DIR, TRACE_OUTPUT_SUFFIX, trace_output_dir

__all__ = ["Run", "Unparsed", "Discovery", "RunPathRefused", "discover", "resolve_run_dir", "MAX_DEPTH"]

MAX_DEPTH = 5
MAX_ENTRIES = 20_000  # directory entries looked at per scan
_TABLES = TABLES_DIR
_TRACE_SUFFIXES = (".pt.trace.json", ".pt.trace.json.gz")


class RunPathRefused(ConfigError):
    """A run id that points outside the logdir (absolute, ``..``, through a symlink)."""


@dataclass(frozen=True)
class Run:
    id: str  # output dir relative to the logdir, POSIX separators
    name: str  # what the run list shows
    kind: str  # "capture" or "trace"
    source: str  # the capture dir or trace file it was parsed from
    event_count: int
    parsed_mtime_ns: int  # when the tables were (re)written

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Unparsed:
    path: str  # relative to the logdir
    kind: str

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Discovery:
    runs: list[Run]
    unparsed: list[Unparsed]
    truncated: bool  # the walk hit MAX_ENTRIES


def _run_of(logdir: Path, out_dir: Path) -> Run:
    info = read_parse_info(out_dir)
    rel = out_dir.relative_to(logdir).as_posix()
    # Named after the capture dir or the trace, with the folders between it and the logdir.
    if out_dir.name == OUTPUT_DIR:
        kind, input_path = "capture", out_dir.parent
    else:
        kind, input_path = "trace", out_dir.with_name(out_dir.name.removesuffix(TRACE_OUTPUT_SUFFIX))
    if out_dir == logdir or input_path == logdir or not input_path.is_relative_to(logdir):
        name = input_path.name
    else:
        name = input_path.relative_to(logdir).as_posix()
    event_count = info.get("event_count")
    return Run(id=rel, name=name, kind=info.get("kind", kind), source=str(info.get("source", "")),
               event_count=event_count if isinstance(event_count, int) else 0,
               parsed_mtime_ns=(out_dir / _TABLES).stat().st_mtime_ns)


def discover(logdir: Path) -> Discovery:
    logdir = Path(logdir).resolve()
    if not logdir.is_dir():
        raise ConfigError(f"{logdir}: not a directory")
    runs: list[Run] = []
    unparsed: list[Unparsed] = []
    seen = 0
    truncated = False
    stack: list[tuple[Path, int]] = [(logdir, 0)]
    while stack:
        here, depth = stack.pop()
        try:
            entries = sorted(os.scandir(here), key=lambda e: e.name)
        except OSError:
            continue
        names = {e.name for e in entries}
        if _TABLES in names and (here / _TABLES).is_dir() and not (here / _TABLES).is_symlink():
            runs.append(_run_of(logdir, here))
            continue  # nothing to find inside an output dir
        is_capture = INFO_FILE in names or RAW_DIR in names
        if is_capture and OUTPUT_DIR not in names:
            unparsed.append(Unparsed(here.relative_to(logdir).as_posix(), "capture"))
        # A torch_npu rank folder (docs/ascend.md): parsed by `mlprof parse` like a capture.
        is_ascend = "ASCEND_PROFILER_OUTPUT" in names and is_ascend_dir(here)
        if is_ascend and OUTPUT_DIR not in names:
            unparsed.append(Unparsed(here.relative_to(logdir).as_posix(), "ascend"))
        for entry in entries:
            seen += 1
            if seen > MAX_ENTRIES:
                truncated = True
                stack.clear()
                break
            if entry.name.startswith(".") or entry.is_symlink():
                continue
            if entry.is_file() and entry.name.endswith(_TRACE_SUFFIXES):
                if trace_output_dir(Path(entry.path)).name not in names:
                    unparsed.append(Unparsed(Path(entry.path).relative_to(logdir).as_posix(), "trace"))
            elif entry.is_dir() and depth < MAX_DEPTH and not (is_capture and entry.name == RAW_DIR) \
                    and not (is_ascend and entry.name == "ASCEND_PROFILER_OUTPUT"):
                stack.append((Path(entry.path), depth + 1))
    runs.sort(key=lambda r: r.id)
    unparsed.sort(key=lambda u: u.path)
    return Discovery(runs=runs, unparsed=unparsed, truncated=truncated)


# Longest run id accepted (a relative path of a parsed output under the logdir).
MAX_RUN_ID_CHARS = 1024


def resolve_run_dir(logdir: Path, run_id: str) -> Path:
    """The output dir of ``run_id``, refusing anything outside ``logdir``.

    Raises RunPathRefused for ids that are absolute, climb with ``..`` or
    pass through a symlink, and ConfigError for ids naming no parsed output.
    """
    logdir = Path(logdir).resolve()
    if len(run_id) > MAX_RUN_ID_CHARS:
        raise ConfigError(f"run id of {len(run_id)} characters: at most {MAX_RUN_ID_CHARS}")
    if not run_id or "\x00" in run_id or run_id.startswith("/") or "\\" in run_id:
        raise RunPathRefused(f"{run_id!r}: refused, not a path inside the logdir")
    # "." is the logdir itself, when --logdir names one parsed output.
    parts = [] if run_id == "." else run_id.split("/")
    if any(p in ("", ".", "..") for p in parts):
        raise RunPathRefused(f"{run_id!r}: refused, not a path inside the logdir")
    try:
        here = logdir
        for part in parts:
            here = here / part
            if here.is_symlink():
                raise RunPathRefused(f"{run_id!r}: refused, a symlink")
        resolved = here.resolve()
        if not resolved.is_relative_to(logdir):
            raise RunPathRefused(f"{run_id!r}: refused, not a path inside the logdir")
        if (resolved / _TABLES).is_symlink():
            raise RunPathRefused(f"{run_id!r}: refused, a symlink")
        if not (resolved / _TABLES).is_dir():
            raise ConfigError(f"{run_id[:80]!r}: no parsed run with this id")
    except OSError as exc:  # a name too long for the file system, and the like
        raise ConfigError(f"{run_id[:80]!r}: not a run id ({exc.strerror or exc})") from None
    return resolved
