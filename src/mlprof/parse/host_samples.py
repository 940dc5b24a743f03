"""Parser of a capture's host samples (host_samples.json, docs/capture_format.md).

Each numeric value of each sample becomes one row of the ``counters`` table:
``name`` is the group (host_cpu, host_cpu_cores, host_memory, host_disk,
host_network, gpu{N}) and ``series`` the value inside it. A killed job leaves
only the sampler's JSON-lines file; it is read the same way, a torn line skipped.

The samples decode into ``HostSample`` of :mod:`mlprof.capture.records`, the
record the sampler encodes. A file that is not a JSON list of samples, or a
field of the wrong type, is a CaptureError of one line naming the file.
"""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import numpy as np

from mlprof.capture import layout
from mlprof.capture.records import HostSample, convert
from mlprof.errors import CaptureError
from mlprof.tables.schema import HOST_COUNTERS, HOST_JOB_PROCESSES_COUNTER, HOST_TOP_PROCESSES_COUNTER

__all__ = ["read_host_counters"]

_GPU_SERIES = ("util_percent", "mem_util_percent", "mem_used_bytes", "power_w", "sm_clock_mhz")
_SAMPLES = msgspec.json.Decoder(list[HostSample])
_SAMPLE = msgspec.json.Decoder(HostSample)


def _load(capture_dir: Path) -> list[HostSample]:
    whole, partial = capture_dir / layout.HOST_SAMPLES_FILE, capture_dir / layout.HOST_SAMPLES_PARTIAL_FILE
    if whole.is_file():
        return _load_whole(whole)
    if partial.is_file():
        return _load_lines(whole, partial)
    return []


def _load_whole(path: Path) -> list[HostSample]:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise CaptureError(f"{path}: unreadable host samples: {exc}") from None
    try:
        return _SAMPLES.decode(data)
    except (msgspec.DecodeError, RecursionError):
        pass
    # Not a list of samples, or JSON that only the standard library reads (NaN, or a process name
    # with a lone surrogate written by older samplers): read it that way, for the same words as before.
    try:
        raw = json.loads(data.decode("utf-8"))
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
        raise CaptureError(f"{path}: unreadable host samples: {exc}") from None
    if not isinstance(raw, list):
        raise CaptureError(f"{path}: expected a JSON list of samples")
    return convert(path, raw, list[HostSample])


def _load_lines(whole: Path, partial: Path) -> list[HostSample]:
    """The sampler's own JSON-lines file, left by a killed job: a line that is not a sample is skipped."""
    try:
        lines = partial.read_bytes().splitlines()
    except OSError as exc:
        raise CaptureError(f"{whole}: unreadable host samples: {exc}") from None
    samples = []
    for line in lines:
        try:
            samples.append(_SAMPLE.decode(line))
            continue
        except (msgspec.DecodeError, RecursionError):
            pass
        try:  # as in _load_whole: what only the standard library reads
            samples.append(msgspec.convert(json.loads(line.decode("utf-8")), HostSample))
        except (ValueError, RecursionError, msgspec.ValidationError):
            continue  # the job was killed mid-line
    return samples


def read_host_counters(capture_dir: Path, pid: int) -> dict[str, np.ndarray]:
    """Counter rows (name, series, pid, ts_ns, value) of a capture's host samples."""
    names, series, ts, values, pids = [], [], [], [], []

    def add(name: str, serie: str, ts_ns: int, value: float | None, row_pid: int = pid) -> None:
        if value is not None:
            names.append(name)
            series.append(serie)
            ts.append(ts_ns)
            values.append(float(value))
            pids.append(row_pid)

    for sample in _load(capture_dir):
        ts_ns = sample.ts_ns
        for key, (name, serie) in HOST_COUNTERS.items():
            add(name, serie, ts_ns, getattr(sample, key))
        for core, value in enumerate(sample.cpu_percent_per_core or []):
            add("host_cpu_cores", f"core{core}", ts_ns, value)
        for gpu in sample.gpus or []:
            for key in _GPU_SERIES:
                add(f"gpu{gpu.index}", key, ts_ns, getattr(gpu, key))
        for procs, counter in ((sample.top_processes, HOST_TOP_PROCESSES_COUNTER),
                               (sample.job_processes, HOST_JOB_PROCESSES_COUNTER)):
            for proc in procs or []:
                add(counter, str(proc.name or proc.pid)[:200], ts_ns, proc.cpu_percent, proc.pid)
    return {
        "name": np.array(names, dtype=object),
        "series": np.array(series, dtype=object),
        "pid": np.array(pids, dtype=np.int64),
        "ts_ns": np.array(ts, dtype=np.int64),
        "value": np.array(values, dtype=np.float64),
    }
