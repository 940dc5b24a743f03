"""Names of a parsed output directory (docs/output_files.md): spelled here once.

A parsed output is ``<capture>/mlprof_output/`` for a capture or an Ascend
folder, ``<trace stem>_mlprof_output/`` beside a trace file; it holds
``tables/`` and ``parse_info.json`` (what was parsed, from which source).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from mlprof.capture.layout import OUTPUT_DIR
from mlprof.tables.schema import TABLES

__all__ = ["OUTPUT_DIR", "TRACE_OUTPUT_SUFFIX", "TABLES_DIR", "PARSE_INFO_FILE", "WINDOWS_DIR",
           "WINDOW_CACHE_FILE", "trace_stem", "trace_output_dir", "tables_schema"]

TABLES_DIR = "tables"
PARSE_INFO_FILE = "parse_info.json"
# Beside a trace file: <stem>_mlprof_output/.
TRACE_OUTPUT_SUFFIX = "_" + OUTPUT_DIR
# Per-window tables of a capture, reused while the window's files are unchanged.
WINDOWS_DIR = "windows"
WINDOW_CACHE_FILE = "window_cache.json"
_TRACE_SUFFIXES = (".pt.trace.json.gz", ".pt.trace.json", ".json.gz", ".json", ".gz")

_SCHEMA_FINGERPRINT = hashlib.sha256(json.dumps(
    {name: [(c.name, c.sql_type) for c in t.columns] for name, t in TABLES.items()}).encode()).hexdigest()[:16]


def trace_stem(name: str) -> str:
    """``rank0.pt.trace.json.gz`` -> ``rank0``."""
    for suffix in _TRACE_SUFFIXES:
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def trace_output_dir(trace: Path) -> Path:
    """Where the parsed output of a trace file goes (beside it)."""
    return trace.parent / (trace_stem(trace.name) + TRACE_OUTPUT_SUFFIX)


def tables_schema() -> str:
    """Fingerprint of the tables' columns: outputs written under another one are re-parsed."""
    return _SCHEMA_FINGERPRINT
