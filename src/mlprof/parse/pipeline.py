"""``parse_path``: find inputs, decode them, build and store the tables.

Output of one input (a capture or a trace file) goes to its output directory:
``tables/<table>.parquet`` and ``parse_info.json`` (what was parsed, what was
skipped and why). Exports are presenters run afterwards on those tables.
"""

from __future__ import annotations

import contextlib
import json
import functools
import os
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from mlprof._version import __version__
from mlprof.batch import InternalError, run_batch
from mlprof.capture import layout
from mlprof.errors import CaptureError, ConfigError, MlprofError, TraceFormatError
from mlprof.settings.options import ExportType
from mlprof.parse.build import WindowData, build_tables
from mlprof.parse.attribution import write_attribution
from mlprof.parse.table_writer import write_tables_and_attribution
from mlprof.parse.capture_files import read_gc, read_markers, read_modules, read_python_samples, read_steps
from mlprof.parse.host_samples import read_host_counters
from mlprof.parse.scalars import read_scalar_columns
from mlprof.parse.job_steps import read_monitor_tables
from mlprof.parse.ascend_common import AscendInput
from mlprof.parse.capture_reader import CaptureInput, TraceInput, WindowFiles, find_inputs
from mlprof.parse.kineto import StringPool, read_kineto
from mlprof.parse.kineto_events import KinetoColumns
from mlprof.parse.kineto_stream import load_spilled
from mlprof.parse.segments import Plan, plan_segments, wants_spill, write_segmented
from mlprof.parse.spill import Spill, SpilledTrace
from mlprof.parse.release_memory import release_freed_memory
from mlprof.capture.files import atomic_write, make_private_dir, output_lock, refuse_link, replace_dir
from mlprof.tables.layout import PARSE_INFO_FILE, TABLES_DIR, WINDOW_CACHE_FILE, WINDOWS_DIR, tables_schema
from mlprof.tables.budget import MIN_MEMORY_BUDGET_BYTES
from mlprof.tables.schema import TABLES
from mlprof.tables.store import combine_tables, named_write_errors, write_tables

__all__ = ["ParseOptions", "ParseResult", "parse_path", "TABLES_DIR", "PARSE_INFO_FILE", "tables_schema"]

_CACHE_VERSION = 2
ProgressFn = Callable[[str, int, int], None]
StageFn = Callable[[str], None]
# Cached window tables are stale as soon as any table's columns change.
_SCHEMA_FINGERPRINT = tables_schema()


@dataclass(frozen=True)
class ParseOptions:
    # Where results go; None = beside the input (capture/mlprof_output, or
    # <trace name>_mlprof_output next to a bare trace). Only for one input.
    output_dir: Path | None = None
    # Called as progress(label, bytes_read, file_bytes) while a trace is read
    # (for gzip, compressed bytes).
    progress: ProgressFn | None = None
    # Called as on_stage(text) when the parse of an input moves on to work
    # that reads no more of the file ("building tables", "writing tables and
    # attributing steps", ...): after the last byte is read, a large trace has
    # a third of its parse still to go.
    on_stage: StageFn | None = None
    # Inputs parsed at once, each in its own process (several captures/traces).
    jobs: int = 1
    # With several inputs: "raise" stops at the first bad one; "continue"
    # parses the others and records the failure in that input's result.
    on_error: str = "raise"
    # Memory the parse of one input aims to stay under (bytes; None: $MLPROF_MEMORY_BUDGET, else 1 GiB).
    # It sizes the blocks the trace is streamed in and how many worker
    # processes decode at once (docs/benchmarks.md says what it does not bound yet).
    memory_budget_bytes: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.jobs, int) or self.jobs < 1:
            raise ConfigError(f"jobs must be a whole number >= 1, not {self.jobs!r}")
        if self.on_error not in ("raise", "continue"):
            raise ConfigError(f"on_error must be 'raise' or 'continue', not {self.on_error!r}")
        budget = self.memory_budget_bytes
        if budget is not None and (not isinstance(budget, int) or budget < MIN_MEMORY_BUDGET_BYTES):
            raise ConfigError(f"memory budget must be at least 64 MiB, not {budget!r}")


@dataclass
class ParseResult:
    source: str
    output_dir: str
    kind: str  # "capture", "trace", "ascend_text" or "ascend_db"
    windows: list[int] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    event_count: int = 0
    unknown_events: dict[str, int] = field(default_factory=dict)
    table_rows: dict[str, int] = field(default_factory=dict)
    parse_seconds: float = 0.0
    capture_status: str | None = None
    # The failure of this input (on_error="continue"); None when it parsed.
    error: str | None = None
    error_type: str | None = None
    # The failure itself, for a caller to raise or map to an exit code (not in to_dict).
    exception: MlprofError | None = field(default=None, repr=False, compare=False)
    # Export types the capture's config asked for ("text", "db"), lower-cased.
    requested_export_types: list[str] = field(default_factory=list)

    @property
    def tables_dir(self) -> Path:
        return Path(self.output_dir) / TABLES_DIR

    def to_dict(self) -> dict:
        return {f: v for f, v in asdict(replace(self, exception=None)).items() if f != "exception"}


def parse_path(path: Path, options: ParseOptions = ParseOptions()) -> list[ParseResult]:
    """Parse a capture dir, a dir of captures/traces, or one trace file.

    With ``options.jobs > 1`` several inputs (e.g. one capture per rank) are
    parsed in that many processes at once.
    """
    inputs = find_inputs(Path(path))
    if options.output_dir is not None and len(inputs) > 1:
        raise ConfigError(f"{path}: --output needs a single capture or trace, found {len(inputs)}")
    # Progress callbacks do not cross processes; each input reports when done.
    parallel = options.jobs > 1 and len(inputs) > 1
    work = functools.partial(_parse_one,
                             options=replace(options, progress=None, on_stage=None) if parallel else options)
    outcomes = run_batch(work, inputs, workers=options.jobs if parallel else 1, on_error=options.on_error)
    results = []
    for item, outcome in zip(inputs, outcomes):
        exc = outcome.error
        if exc is None:
            results.append(outcome.value)
            continue
        source = item.path
        out = Path(options.output_dir) if options.output_dir else item.output_dir
        results.append(ParseResult(source=str(source), output_dir=str(out),
                                   kind="capture" if isinstance(item, CaptureInput) else
                                   f"ascend_{item.format}" if isinstance(item, AscendInput) else "trace",
                                   error=str(exc), error_type=type(exc).__name__, exception=exc))
    return results


# The failure of one input among several that was a bug (kept under its old name too).
InternalParseError = InternalError


def _capture_metadata(item: CaptureInput) -> dict[str, object]:
    meta: dict[str, object] = {}
    for key in ("worker_name", "host", "pid", "rank", "world_size", "local_rank", "status",
                "versions", "config", "created_wall_ns", "schema_version", "step_times",
                "steps_seen", "job_steps", "last_step_end_ns"):
        if key in item.manifest:
            meta[f"capture.{key}"] = item.manifest[key]
    for key, value in item.metadata.items():
        meta[f"profiler_metadata.{key}"] = value
    return meta


def _requested_export_types(manifest: dict) -> list[str]:
    config = manifest.get("config") or {}
    experimental = config.get("experimental_config") or {} if isinstance(config, dict) else {}
    wanted = experimental.get("export_type") if isinstance(experimental, dict) else None
    if isinstance(wanted, str):
        wanted = [wanted]
    if not isinstance(wanted, list):
        return []
    return sorted({str(w).split(".")[-1].lower() for w in wanted} & {t.value for t in ExportType})


def _stage(on_stage: StageFn | None, text: str) -> None:
    if on_stage is not None:
        on_stage(text)


def _progress_for(options: ParseOptions, label: str):
    if options.progress is None:
        return None
    return lambda done, total: options.progress(label, done, total)


def _count_events(result: ParseResult, event_count: int, unknown: list) -> None:
    result.event_count += event_count
    for ph, cat, count in unknown:
        key = f"{ph}/{cat}"
        result.unknown_events[key] = result.unknown_events.get(key, 0) + count


def _parse_one(item: CaptureInput | TraceInput, options: ParseOptions) -> ParseResult:
    # A default output dir (inside the capture, beside the trace) is refused when it is a symlink:
    # whoever wrote the input could have planted it. An --output the user named is theirs to choose.
    out_dir = Path(options.output_dir) if options.output_dir else refuse_link(item.output_dir, "output directory")
    existed = out_dir.exists()
    try:
        with named_write_errors(out_dir):
            if isinstance(item, AscendInput):  # torch_npu output: its own parsers (docs/ascend.md)
                return _parse_ascend(item, options)
            if isinstance(item, TraceInput):
                return _parse_trace(item, options)
            return _parse_capture(item, options)
    except TraceFormatError as exc:
        _forget_new_output(out_dir, existed)
        if str(item.path) in str(exc):
            raise
        # Found past the reader (a step name while building tables): still "FILE: problem".
        raise TraceFormatError(f"{item.path}: {exc}") from None
    except BaseException:
        _forget_new_output(out_dir, existed)
        raise


def _forget_new_output(out_dir: Path, existed: bool) -> None:
    # An output dir this run made and that holds no tables is debris.
    if not existed and not (out_dir / TABLES_DIR).exists():
        shutil.rmtree(out_dir, ignore_errors=True)


def write_parsed(out_dir: Path, columns: dict, strings: list[str], result: ParseResult, started: float,
                 budget_bytes: int | None = None, on_stage: StageFn | None = None) -> None:
    """Write one input's tables, add the attribution, publish them with parse_info.json (every parser's last step).

    ``columns`` is emptied as the tables are written (``write_tables`` drops
    each once on disk): the attribution reads them back from there, and
    memory holds one copy, not two.
    """
    _stage(on_stage, "writing tables and attributing steps")
    _write_and_publish(out_dir, result, started,
                       lambda tmp: write_tables_and_attribution(tmp, columns, strings, budget_bytes))


def _write_and_publish(out_dir: Path, result: ParseResult, started: float, write: Callable[[Path], None],
                       locked: bool = False) -> None:
    """``write`` the tables into a temporary directory, then publish them with parse_info.json
    (``locked``: the caller holds ``out_dir``'s lock)."""
    make_private_dir(out_dir)
    with contextlib.nullcontext() if locked else output_lock(out_dir):
        tmp = out_dir / f".tmp_{TABLES_DIR}_{os.getpid()}"
        write(tmp)
        _publish_tables(tmp, out_dir, result, started)


def _publish_tables(tmp: Path, out_dir: Path, result: ParseResult, started: float) -> None:
    """Swap finished tables in with their parse_info.json, both complete or neither."""
    result.parse_seconds = round(time.perf_counter() - started, 3)
    # The tables' layout, so readers re-parse outputs an older mlprof wrote (see mlprof.outputs.is_stale).
    atomic_write(tmp / PARSE_INFO_FILE, json.dumps({**result.to_dict(), "tables_schema": _SCHEMA_FINGERPRINT},
                                                   indent=2))
    replace_dir(tmp, out_dir / TABLES_DIR)
    os.replace(out_dir / TABLES_DIR / PARSE_INFO_FILE, out_dir / PARSE_INFO_FILE)


def _parse_ascend(item: AscendInput, options: ParseOptions) -> ParseResult:
    """What torch_npu wrote (one rank folder): its own reader, then the same writing as every input."""
    from mlprof.parse.ascend import read_ascend  # NumPy-heavy readers, loaded only for Ascend input

    started = time.perf_counter()
    out_dir = Path(options.output_dir) if options.output_dir else item.output_dir
    result = ParseResult(source=str(item.path), output_dir=str(out_dir), kind=f"ascend_{item.format}", windows=[0])
    columns, strings = read_ascend(item, result)
    write_parsed(out_dir, columns, strings, result, started, options.memory_budget_bytes, options.on_stage)
    return result


def _parse_trace(item: TraceInput, options: ParseOptions) -> ParseResult:
    """A bare trace file: one window, tables written directly."""
    started = time.perf_counter()
    out_dir = Path(options.output_dir) if options.output_dir else item.output_dir
    result = ParseResult(source=str(item.path), output_dir=str(out_dir), kind="trace", windows=[0])
    pool = StringPool()
    budget = options.memory_budget_bytes
    meta = {"source.path": str(item.path)}
    if wants_spill(item.path, budget):
        k = _parse_trace_in_stretches(item, options, out_dir, result, started, pool, meta)
        if isinstance(k, ParseResult):
            return k
    else:
        k = read_kineto(item.path, pool, _progress_for(options, item.path.name), budget)
        _count_events(result, k.event_count, list(_unknown(k)))
    _stage(options.on_stage, "building tables")
    columns = build_tables([WindowData(window_index=0, kineto=k)], pool, meta)
    del k
    release_freed_memory()
    result.table_rows = {name: len(cols["window_index"]) for name, cols in columns.items()}
    write_parsed(out_dir, columns, pool.values(), result, started, budget, options.on_stage)
    return result


def _unknown(k) -> Iterator[tuple[str, str, int]]:
    return ((ph, cat, n) for (ph, cat), n in k.unknown.items())


def _read_spilled(path: Path, pool: StringPool, progress, budget: int | None, spill: Spill,
                  mlprof_steps: list | None = None) -> tuple[KinetoColumns | SpilledTrace, Plan | None]:
    """A trace read with its decoded pieces on disk, and the plan to build it in stretches; without a
    plan (no clean cut), its columns read back whole."""
    k = read_kineto(path, pool, progress, budget, spill)
    plan = plan_segments(k, pool, budget, mlprof_steps) if isinstance(k, SpilledTrace) else None
    if plan is None:
        return (load_spilled(k) if isinstance(k, SpilledTrace) else k), None
    return k, plan


def _parse_trace_in_stretches(item: TraceInput, options: ParseOptions, out_dir: Path, result: ParseResult,
                              started: float, pool: StringPool, meta: dict) -> ParseResult | KinetoColumns:
    """A trace too large to build whole (``wants_spill``): its decoded pieces wait on disk and its tables are
    built a stretch of time at a time (:mod:`mlprof.parse.segments`); returns the published result, or the
    columns read back whole when the trace cannot be cut."""
    budget = options.memory_budget_bytes
    make_private_dir(out_dir)
    # Held from the read on: the spill is in out_dir, where a parse taking the lock clears leftovers.
    with output_lock(out_dir):
        spill = Spill(out_dir / f".tmp_spill_{os.getpid()}")
        try:
            k, plan = _read_spilled(item.path, pool, _progress_for(options, item.path.name), budget, spill)
            cols = k.cols if isinstance(k, SpilledTrace) else k
            _count_events(result, cols.event_count, list(_unknown(cols)))
            if plan is None:
                return k
            _write_and_publish(out_dir, result, started,
                               functools.partial(_write_segmented, trace=k, plan=plan, pool=pool, meta=meta,
                                                 result=result, options=options), locked=True)
            return result
        finally:
            spill.remove()


def _write_segmented(tmp: Path, trace: SpilledTrace, plan, pool: StringPool, meta: dict, result: ParseResult,
                     options: ParseOptions) -> None:
    result.table_rows = write_segmented(tmp, trace, plan, pool, meta, options.memory_budget_bytes, options.on_stage)
    _stage(options.on_stage, "attributing steps")
    write_attribution(tmp, options.memory_budget_bytes)


def _window_stamp(wf: WindowFiles) -> dict:
    """What a window's cached tables were made from: its files' sizes and times."""
    files = {}
    for path in (wf.path / layout.WINDOW_FILE, wf.kineto, wf.steps, wf.markers, wf.gc, wf.python_samples, wf.modules):
        if path is not None and path.is_file():
            st = path.stat()
            files[path.name] = [st.st_size, st.st_mtime_ns]
    return {"cache_version": _CACHE_VERSION, "mlprof": __version__, "schema": _SCHEMA_FINGERPRINT, "files": files}


def _cached_window(cache: Path, stamp: dict) -> dict | None:
    try:
        info = json.loads((cache / WINDOW_CACHE_FILE).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(info, dict) or {k: info.get(k) for k in stamp} != stamp:
        return None
    if not all((cache / f"{name}.parquet").is_file() for name in TABLES):
        return None
    return info


def _parse_window(wf: WindowFiles, out_dir: Path, cache: Path, stamp: dict, options: ParseOptions) -> dict:
    """Parse one window on its own into ``cache`` (its tables, ids from 0); a window whose trace would not
    fit the budget built whole is built in stretches, as a bare trace is."""
    pool = StringPool()
    budget = options.memory_budget_bytes
    win = WindowData(window_index=wf.window_index, steps=read_steps(wf.steps),
                     markers=read_markers(wf.markers), gc=read_gc(wf.gc),
                     python_samples=read_python_samples(wf.python_samples), modules=read_modules(wf.modules),
                     source=str(wf.path))
    progress = _progress_for(options, f"window {wf.window_index}")
    tmp = out_dir / f".tmp_window_{wf.window_index}_{os.getpid()}"
    spill = Spill(out_dir / f".tmp_spill_{os.getpid()}") if wf.kineto and wants_spill(wf.kineto, budget) else None
    try:
        k, plan = None, None
        if spill is not None:
            k, plan = _read_spilled(wf.kineto, pool, progress, budget, spill, win.steps)
        elif wf.kineto:
            k = read_kineto(wf.kineto, pool, progress, budget)
        cols = k.cols if isinstance(k, SpilledTrace) else k
        info = dict(stamp)
        info["event_count"] = cols.event_count if cols else 0
        info["unknown"] = [list(u) for u in _unknown(cols)] if cols else []
        del cols
        _stage(options.on_stage, f"window {wf.window_index}: building tables")
        if plan is not None:
            write_segmented(tmp, k, plan, pool, {}, budget, options.on_stage, win)
        else:
            win.kineto = k
            columns = build_tables([win], pool, {})
            del win, k
            release_freed_memory()
            _stage(options.on_stage, f"window {wf.window_index}: writing tables")
            write_tables(tmp, columns, pool.values(), budget)
    finally:
        if spill is not None:
            spill.remove()
    atomic_write(tmp / WINDOW_CACHE_FILE, json.dumps(info))
    replace_dir(tmp, cache)
    return info


def _parse_capture(item: CaptureInput, options: ParseOptions) -> ParseResult:
    """A capture: each window parsed on its own (and kept, so the parse the
    collector starts after every window only decodes the new one), then the
    windows' tables stacked into the capture's tables."""
    started = time.perf_counter()
    out_dir = Path(options.output_dir) if options.output_dir else item.output_dir
    result = ParseResult(source=str(item.capture_dir), output_dir=str(out_dir), kind="capture",
                         skipped=list(item.skipped), capture_status=item.manifest.get("status"),
                         requested_export_types=_requested_export_types(item.manifest))
    meta = _capture_metadata(item)
    make_private_dir(out_dir)
    with output_lock(out_dir):
        cache_root = make_private_dir(refuse_link(out_dir / WINDOWS_DIR, "window cache directory"))
        parts: list[Path] = []
        errors: list[MlprofError] = []
        for wf in item.windows:
            cache = cache_root / layout.window_dir_name(wf.window_index)
            stamp = _window_stamp(wf)
            info = _cached_window(cache, stamp)
            if info is None:
                # Failure policy: a window whose files are bad is skipped and
                # reported; the other windows are still parsed (the collector
                # re-parses after every window, so one bad window must not
                # block the rest). With no window left, the first error is raised.
                try:
                    info = _parse_window(wf, out_dir, cache, stamp, options)
                except (TraceFormatError, CaptureError) as exc:
                    errors.append(exc)
                    result.skipped.append(str(exc))
                    continue
            parts.append(cache)
            result.windows.append(wf.window_index)
            _count_events(result, info.get("event_count", 0), info.get("unknown", []))
        if errors and not parts:
            raise errors[0]
        if not parts:
            # Nothing parsed (every window skipped, or none written yet): an error, not 0 events.
            why = f": {result.skipped[0]}" + (f" (and {len(result.skipped) - 1} more)" if len(result.skipped) > 1
                                              else "") if result.skipped else ""
            raise CaptureError(f"{item.capture_dir}: no complete window to parse{why}")
        kept = {p.name for p in parts}
        for stale in cache_root.iterdir():  # windows gone, or bad now
            if stale.name not in kept:
                shutil.rmtree(stale, ignore_errors=True)
        tmp = out_dir / f".tmp_{TABLES_DIR}_{os.getpid()}"
        host_counters = read_host_counters(item.capture_dir, int(item.manifest.get("pid") or 0))
        scalars = read_scalar_columns(item.scalar_segments, result.skipped)
        capture_rows = read_monitor_tables(item.capture_dir, item.manifest, result.skipped)
        if scalars:
            capture_rows["scalars"] = scalars
        _stage(options.on_stage, f"stacking {len(parts)} window(s)")
        counts = combine_tables(tmp, parts, [(k, json.dumps(v, default=str)) for k, v in meta.items()],
                                host_counters, capture_rows or None,
                                budget_bytes=options.memory_budget_bytes)
        _stage(options.on_stage, "attributing steps")
        write_attribution(tmp, options.memory_budget_bytes)
        result.table_rows = {name: n for name, n in counts.items() if n}
        _publish_tables(tmp, out_dir, result, started)
    return result
