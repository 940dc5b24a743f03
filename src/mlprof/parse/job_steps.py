"""Parser of monitor mode's files (job_steps.bin, job_monitor.json): the ``job_steps`` and ``monitor_windows`` tables.

Both belong to the capture (``window_index`` of job_steps is NULL); a step's
``covered_by_window`` is the window whose first..last step holds it, from the
manifest's windows. A torn last record (a killed job) is left out; a bad file
is reported in ``skipped`` and the rest of the capture still parses.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from mlprof.capture.job_series import FIELDS, MONITOR_FILE, SERIES_FILE, TRIGGERS, read_series
from mlprof.parse.kineto_events import MISSING

__all__ = ["read_monitor_tables"]


def read_monitor_tables(capture_dir: Path, manifest: dict, skipped: list[str]) -> dict[str, dict[str, np.ndarray]]:
    """``{"job_steps": columns, "monitor_windows": columns}`` of a monitored capture; {} without a series."""
    series_path = capture_dir / SERIES_FILE
    if not series_path.is_file():
        return {}
    try:
        records = read_series(series_path)
    except (OSError, ValueError) as exc:
        skipped.append(f"{series_path}: not read: {exc}")
        return {}
    info = _monitor_info(capture_dir / MONITOR_FILE, skipped)
    spans = sorted((w["first_step"], w["last_step"], w["index"]) for w in manifest.get("windows") or []
                   if isinstance(w, dict) and isinstance(w.get("first_step"), int)
                   and isinstance(w.get("last_step"), int) and isinstance(w.get("index"), int))
    opened = [w for w in info.get("windows", []) if isinstance(w, dict)]
    reasons = {w.get("trigger_step"): w.get("reason") for w in opened}
    col = {name: np.array([r[i] for r in records], dtype=np.int64) for i, name in enumerate(FIELDS)}
    n = len(records)
    covered = np.full(n, MISSING, dtype=np.int64)
    for first, last, index in spans:
        covered[(col["step"] >= first) & (col["step"] <= last)] = index
    triggers = []
    for step, code in zip(col["step"].tolist(), col["trigger"].tolist()):
        triggers.append(reasons.get(step) or TRIGGERS.get(code))
    job_steps = {
        "step": col["step"], "steps": col["steps"], "start_ns": col["start_ns"], "wall_ns": col["wall_ns"],
        "cpu_ns": _nulls(col["cpu_ns"]), "wait_ns": _nulls(col["wait_ns"]), "data_ns": col["data_ns"],
        "gc_ns": col["gc_ns"], "rss_bytes": _nulls(col["rss_bytes"]), "covered_by_window": covered,
        "warmup": col["covered"] == 2, "trigger": np.array(triggers, dtype=object),
    }
    rows = []
    for w in opened:
        first = w.get("first_step")
        index = next((i for f, _l, i in spans if f == first), None)
        rows.append((index, w.get("reason"), w.get("detail"), w.get("trigger_step"), first, w.get("last_step"), None))
    for w in info.get("skipped", []):
        if isinstance(w, dict):
            rows.append((None, w.get("reason"), w.get("detail"), w.get("trigger_step"), None, None, w.get("why")))
    out = {"job_steps": job_steps}
    if rows:
        out["monitor_windows"] = {
            "window": np.array([MISSING if r[0] is None else r[0] for r in rows], dtype=np.int64),
            "reason": np.array([r[1] for r in rows], dtype=object),
            "detail": np.array([r[2] for r in rows], dtype=object),
            "trigger_step": np.array([_int(r[3]) for r in rows], dtype=np.int64),
            "first_step": np.array([_int(r[4]) for r in rows], dtype=np.int64),
            "last_step": np.array([_int(r[5]) for r in rows], dtype=np.int64),
            "skipped": np.array([r[6] for r in rows], dtype=object),
        }
    return out


def _nulls(values: np.ndarray) -> np.ndarray:
    """-1 (not measured) as the tables' NULL."""
    return np.where(values < 0, MISSING, values)


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else MISSING


def _monitor_info(path: Path, skipped: list[str]) -> dict:
    if not path.is_file():
        skipped.append(f"{path}: missing (the job ended before mlprof closed the capture): windows' triggers "
                       "come from the series alone")
        return {}
    try:
        info = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        skipped.append(f"{path}: not read: {exc}")
        return {}
    return info if isinstance(info, dict) else {}
