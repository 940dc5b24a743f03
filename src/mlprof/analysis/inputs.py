"""Kept for callers of the old place: parsed outputs live in :mod:`mlprof.outputs` now.

New code imports from ``mlprof.outputs``; analyses take a :class:`TableStore`
and never locate or parse inputs themselves.
"""

from __future__ import annotations

from mlprof.outputs import ParsedOutput, is_stale, single_output
from mlprof.outputs import parsed_outputs as parsed_outputs_of

__all__ = ["ParsedOutput", "parsed_outputs_of", "single_output", "is_stale"]
