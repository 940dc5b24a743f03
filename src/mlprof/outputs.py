"""The home of parsed outputs: find them, open them, tell whether they are fresh and what they came from.

A parsed output is the directory one parse writes (``tables/`` and
``parse_info.json``; names in :mod:`mlprof.tables.layout`). The CLI, the web
UI and the library's path-taking functions find outputs here; only
:func:`parsed_outputs` (with ``parse_missing``) ever runs the parser, so the
analyses themselves only read tables.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from mlprof.capture.files import refuse_link
from mlprof.capture.layout import INFO_FILE, OUTPUT_DIR, RAW_DIR
from mlprof.errors import ConfigError
from mlprof.tables.layout import PARSE_INFO_FILE, TABLES_DIR, tables_schema
from mlprof.tables.store import TableStore

__all__ = ["ParsedOutput", "parsed_outputs", "single_output", "is_stale", "read_parse_info", "source_of",
           "input_sources", "is_output_dir"]


@dataclass(frozen=True)
class ParsedOutput:
    source: str  # the capture, trace file or Ascend folder the tables came from
    output_dir: Path  # holds tables/ and parse_info.json

    @property
    def tables_dir(self) -> Path:
        return self.output_dir / TABLES_DIR

    def info(self) -> dict:
        """parse_info.json ({} when missing or unreadable)."""
        return read_parse_info(self.output_dir)

    def open(self) -> TableStore:
        """The tables, read-only (use as a context manager)."""
        return TableStore(self.tables_dir)

    def is_stale(self) -> bool:
        return is_stale(self.source, self.output_dir)


def is_output_dir(path: Path) -> bool:
    """A parsed output directory itself (it holds tables/, and is not a capture)."""
    return (path / TABLES_DIR).is_dir() and not (path / RAW_DIR).is_dir()


def read_parse_info(output_dir: Path) -> dict:
    try:
        info = json.loads((Path(output_dir) / PARSE_INFO_FILE).read_text())
    except (OSError, ValueError):
        return {}
    return info if isinstance(info, dict) else {}


def source_of(output_dir: Path) -> str:
    """The input an output was parsed from, as parse_info.json records it; else what the layout says."""
    info = read_parse_info(output_dir)
    source = info.get("source")
    if isinstance(source, str) and source:
        return _resolved_source(source, info.get("output_dir"), Path(output_dir))
    output_dir = Path(output_dir)
    if output_dir.name == OUTPUT_DIR:
        return str(output_dir.parent)
    return str(output_dir)  # a trace's output without parse_info.json: the trace's name is lost


def _resolved_source(source: str, recorded_out: object, output_dir: Path) -> str:
    """``source`` as recorded by a parse run with relative paths, made absolute by the folder that parse ran
    in (the output dir's path less the relative one it recorded): read from another folder (the dashboard's
    server), the relative name found nothing and the overview said "raw data 0 B"."""
    if Path(source).is_absolute() or not isinstance(recorded_out, str) or Path(recorded_out).is_absolute():
        return source
    parts = Path(recorded_out).parts
    here = Path(os.path.abspath(output_dir)).parts
    if not parts or ".." in parts or here[-len(parts):] != parts:
        return source
    return os.path.normpath(os.path.join(*here[:-len(parts)], source))


def _newest_input_ns(source: Path) -> int:
    """Latest mtime among the files a parse of ``source`` reads (0 if unreadable)."""
    try:
        if source.is_file():
            return source.stat().st_mtime_ns
        files = [source / INFO_FILE, *(source / RAW_DIR).rglob("*")]
        return max((f.stat().st_mtime_ns for f in files if f.is_file() and not f.is_symlink()), default=0)
    except OSError:
        return 0


def is_stale(source: str | Path, output_dir: Path) -> bool:
    """True when the raw data changed after its tables were written, or an mlprof with other
    table columns wrote them (re-parse them)."""
    info = Path(output_dir) / PARSE_INFO_FILE
    try:
        parsed_ns = info.stat().st_mtime_ns
        if json.loads(info.read_text()).get("tables_schema") != tables_schema():
            return True
    except (OSError, ValueError, AttributeError):
        return True
    return _newest_input_ns(Path(source)) > parsed_ns


def input_sources(path: Path) -> list[tuple[str, Path]]:
    """(source, default output dir) of every input under ``path`` (captures, traces, Ascend folders)."""
    from mlprof.parse.capture_reader import find_inputs

    return [(str(item.path), Path(item.output_dir)) for item in find_inputs(Path(path))]


def _parse(source: str, output: Path | None, progress) -> Path:
    from mlprof.parse.pipeline import ParseOptions, parse_path

    # The CLI's progress bar also says the parse's steps after the read.
    options = ParseOptions(output_dir=output, progress=progress, on_stage=getattr(progress, "stage", None))
    return Path(parse_path(Path(source), options)[0].output_dir)


def parsed_outputs(path: Path, parse_missing: bool = True, output: Path | None = None,
                   progress=None) -> list[ParsedOutput]:
    """Every parsed output under ``path``; with ``parse_missing``, inputs with no tables or stale ones are
    parsed first (the one place outside ``mlprof parse`` that runs the parser).

    ``path`` may itself be an output directory; ``output`` redirects the parse
    of a single input; ``progress`` is the parser's progress callback.
    """
    path = Path(path)
    try:
        is_output = is_output_dir(path)
    except PermissionError as exc:  # a folder this user cannot enter: as unreadable as a missing one
        from mlprof.parse.capture_reader import unreadable

        raise unreadable(exc, path) from None
    if is_output:
        source = source_of(path)
        if parse_missing and Path(source).exists() and is_stale(source, path):
            _parse(source, path, progress)
        return [ParsedOutput(source, path)]
    found = []
    for source, default_out in input_sources(path):
        out = Path(output) if output else refuse_link(default_out, "output directory")
        # No tables yet, or raw data newer than them (a window added, a trace rewritten): parse.
        if not (out / TABLES_DIR).is_dir() or (parse_missing and is_stale(source, out)):
            if not parse_missing:
                continue
            out = _parse(source, output, progress)
        found.append(ParsedOutput(source, out))
    return found


def single_output(path: Path, parse_missing: bool = True) -> ParsedOutput:
    """The one parsed output of ``path``; a clear error when there are several or none."""
    outs = parsed_outputs(path, parse_missing=parse_missing)
    if len(outs) != 1:
        raise ConfigError(f"{path}: expected one capture or trace, found {len(outs)}"
                          + (": " + ", ".join(o.source for o in outs[:5]) if outs else ""))
    return outs[0]
