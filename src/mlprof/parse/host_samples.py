"""Parser of a capture's host samples (host_samples.json, docs/capture_format.md).

Each numeric value of each sample becomes one row of the ``counters`` table:
``name`` is the group (host_cpu, host_cpu_cores, host_memory, host_disk,
host_network, gpu{N}) and ``series`` the value inside it. A killed job leaves
only the sampler's JSON-lines file; it is read the same way.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from mlprof.capture import layout
from mlprof.errors import CaptureError
from mlprof.tables.schema import HOST_COUNTERS, HOST_JOB_PROCESSES_COUNTER, HOST_TOP_PROCESSES_COUNTER

__all__ = ["read_host_counters"]

_GPU_SERIES = ("util_percent", "mem_util_percent", "mem_used_bytes", "power_w", "sm_clock_mhz")


def _load(root: Path) -> list:
    whole, partial = root / layout.HOST_SAMPLES_FILE, root / layout.HOST_SAMPLES_PARTIAL_FILE
    try:
        if whole.is_file():
            data = json.loads(whole.read_text(encoding="utf-8"))
            if not isinstance(data, list):
                raise CaptureError(f"{whole}: expected a JSON list of samples")
            return data
        if partial.is_file():
            samples = []
            for line in partial.read_text(encoding="utf-8").splitlines():
                try:
                    samples.append(json.loads(line))
                except ValueError:
                    continue  # the job was killed mid-line
            return samples
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise CaptureError(f"{whole}: unreadable host samples: {exc}") from None
    return []


def read_host_counters(root: Path, pid: int) -> dict[str, np.ndarray]:
    """Counter rows (name, series, pid, ts_ns, value) of a capture's host samples."""
    names, series, ts, values, pids = [], [], [], [], []

    def add(name: str, serie: str, ts_ns: int, value, row_pid: int = pid) -> None:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            names.append(name)
            series.append(serie)
            ts.append(ts_ns)
            values.append(float(value))
            pids.append(row_pid)

    for sample in _load(root):
        if not isinstance(sample, dict) or not isinstance(sample.get("ts_ns"), int):
            continue
        ts_ns = sample["ts_ns"]
        for key, (name, serie) in HOST_COUNTERS.items():
            if key in sample:
                add(name, serie, ts_ns, sample[key])
        for core, value in enumerate(sample.get("cpu_percent_per_core") or []):
            add("host_cpu_cores", f"core{core}", ts_ns, value)
        for gpu in sample.get("gpus") or []:
            if isinstance(gpu, dict):
                for key in _GPU_SERIES:
                    add(f"gpu{gpu.get('index', 0)}", key, ts_ns, gpu.get(key))
        for key, counter in (("top_processes", HOST_TOP_PROCESSES_COUNTER),
                             ("job_processes", HOST_JOB_PROCESSES_COUNTER)):
            for proc in sample.get(key) or []:
                if isinstance(proc, dict) and isinstance(proc.get("pid"), int):
                    add(counter, str(proc.get("name") or proc["pid"])[:200], ts_ns, proc.get("cpu_percent"),
                        proc["pid"])
    return {
        "name": np.array(names, dtype=object),
        "series": np.array(series, dtype=object),
        "pid": np.array(pids, dtype=np.int64),
        "ts_ns": np.array(ts, dtype=np.int64),
        "value": np.array(values, dtype=np.float64),
    }
