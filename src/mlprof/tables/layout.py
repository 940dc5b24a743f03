"""Names of a parsed output directory (docs/output_files.md): spelled here once.

A parsed output is ``<capture>/mlprof_output/`` for a capture or an Ascend
folder, ``<trace stem>_mlprof_output/`` beside a trace file; it holds
``tables/`` and ``parse_info.json`` (what was parsed, from which source).
"""

from __future__ import annotations

import hashlib
import json
import os
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


# Longest file name most file systems take (bytes; NAME_MAX of ext4, xfs, btrfs, tmpfs).
_NAME_MAX_BYTES = 255


def trace_output_dir(trace: Path) -> Path:
    """Where the parsed output of a trace file goes (beside it).

    A name too long for ``<stem>_mlprof_output`` (a 242-character trace name) keeps the stem's
    start and adds a hash of the whole name: the same trace always gets the same folder, two
    long names sharing a start get two, and no UTF-8 character is cut.
    """
    stem = trace_stem(trace.name)
    if len(os.fsencode(stem + TRACE_OUTPUT_SUFFIX)) > _NAME_MAX_BYTES:
        digest = hashlib.sha256(os.fsencode(trace.name)).hexdigest()[:16]
        room = _NAME_MAX_BYTES - len(TRACE_OUTPUT_SUFFIX) - len(digest) - 1
        head = os.fsencode(stem)[:room]
        while head and head[-1] & 0xC0 == 0x80:  # UTF-8 continuation bytes: the end of a character cut
            head = head[:-1]
        if head and head[-1] >= 0xC0:  # and its first byte
            head = head[:-1]
        stem = os.fsdecode(head) + "-" + digest
    return trace.parent / (stem + TRACE_OUTPUT_SUFFIX)


def tables_schema() -> str:
    """Fingerprint of the tables' columns: outputs written under another one are re-parsed."""
    return _SCHEMA_FINGERPRINT
