"""Parser of a capture's training scalars (``scalars/segment_NNNN.json``, docs/capture_format.md).

Segments are read in order; their rows become the ``scalars`` table, which
belongs to the capture as a whole (``window_index`` NULL). A bad segment is
reported and skipped: the profile and the other segments are still parsed.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from mlprof.errors import CaptureError
from mlprof.parse.capture_files import read_scalars_segment
from mlprof.parse.kineto_events import MISSING

__all__ = ["read_scalar_columns"]


def read_scalar_columns(segments: list[Path], skipped: list[str]) -> dict[str, np.ndarray] | None:
    """Column arrays of the ``scalars`` table (None without any row); bad segments go to ``skipped``."""
    names: list[str] = []
    steps: list[int] = []
    ts: list[int] = []
    values: list[float] = []
    sources: list[str] = []
    dropped = 0
    for path in segments:
        try:
            segment = read_scalars_segment(path)
        except CaptureError as exc:
            skipped.append(str(exc))
            continue
        dropped += segment.dropped
        for name, step, ts_ns, value, source in segment.rows:
            names.append(name)
            steps.append(MISSING if step is None else step)
            ts.append(ts_ns)
            values.append(np.nan if value is None else value)
            sources.append(source)
    if dropped:
        skipped.append(f"{segments[0].parent}: {dropped} training scalar(s) were not recorded (the capture's limit "
                       "was reached)")
    if not names:
        return None
    return {
        "name": np.array(names, dtype=object),
        "step": np.array(steps, dtype=np.int64),
        "value": np.array(values, dtype=np.float64),
        "ts_ns": np.array(ts, dtype=np.int64),
        "source": np.array(sources, dtype=object),
    }
