"""Locating the parsed tables of a path given to a public analysis function.

The analyses themselves take a :class:`TableStore`; these helpers let the
path-taking conveniences (``op_analyse(path, ...)``, ``compare_paths``,
``cluster``) accept what a user has at hand: a parsed output directory, a
capture directory, a trace file, or a directory of them, parsing on demand.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from mlprof.errors import ConfigError
from mlprof.parse.capture_reader import find_inputs
from mlprof.parse.pipeline import PARSE_INFO_FILE, TABLES_DIR, ParseOptions, parse_path, tables_schema

__all__ = ["ParsedOutput", "parsed_outputs_of", "single_output", "is_stale"]


@dataclass(frozen=True)
class ParsedOutput:
    source: str  # the capture or trace the tables came from
    output_dir: Path  # holds tables/ (and parse_info.json)

    @property
    def tables_dir(self) -> Path:
        return self.output_dir / TABLES_DIR


def _source_of(out: Path) -> str:
    try:
        return json.loads((out / PARSE_INFO_FILE).read_text()).get("source", str(out))
    except (OSError, ValueError):
        return str(out)


def _newest_input_ns(source: Path) -> int:
    """Latest mtime among the files a parse of ``source`` reads (0 if unreadable)."""
    try:
        if source.is_file():
            return source.stat().st_mtime_ns
        files = [source / "profiler_info.json", *(source / "raw").rglob("*")]
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


def parsed_outputs_of(path: Path, parse_missing: bool = True, output: Path | None = None,
                      progress=None) -> list[ParsedOutput]:
    """Every parsed output under ``path``, parsing inputs that have none yet (unless told not to).

    ``path`` may itself be an output directory (one holding ``tables/``);
    ``output`` redirects the parse of a single input; ``progress`` is the
    parser's progress callback.
    """
    path = Path(path)
    if (path / TABLES_DIR).is_dir() and not (path / "raw").is_dir():
        source = _source_of(path)
        if parse_missing and Path(source).exists() and is_stale(source, path):
            parse_path(Path(source), ParseOptions(output_dir=path, progress=progress))
        return [ParsedOutput(source, path)]
    found = []
    for item in find_inputs(path):
        source = str(getattr(item, "root", None) or item.path)
        out = Path(output) if output else Path(item.output_dir)
        # No tables yet, or raw data newer than them (a window added, a trace rewritten): parse.
        if not (out / TABLES_DIR).is_dir() or (parse_missing and is_stale(source, out)):
            if not parse_missing:
                continue
            out = Path(parse_path(Path(source), ParseOptions(output_dir=output, progress=progress))[0].output_dir)
        found.append(ParsedOutput(source, out))
    return found


def single_output(path: Path) -> ParsedOutput:
    """The one parsed output of ``path``; a clear error when there are several or none."""
    outs = parsed_outputs_of(path)
    if len(outs) != 1:
        raise ConfigError(f"{path}: expected one capture or trace, found {len(outs)}"
                          + (": " + ", ".join(o.source for o in outs[:5]) if outs else ""))
    return outs[0]
