"""Names and units people read, for things the tables store under internal names.

Counters are stored as (name, series) with the unit only in the series name
(``host_cpu``/``system_percent``, Ascend's ``HBM 0``/``Read(MB/s)``); memory
rows carry Kineto's device type code. The dashboard shows "Host CPU: system"
in percent and "GPU 0", never ``device type 1 / device 0``.
"""

from __future__ import annotations

import re


__all__ = ["counter_label", "device_label", "UNITS"]

# Units the browser formats (util.js fmtValue): anything else is shown as a plain number with this suffix.
UNITS = ("percent", "bytes", "bytes_per_s", "count")

_HOST_GROUPS = {"host_cpu": "Host CPU", "host_memory": "Host memory", "host_disk": "Host disk",
                "host_network": "Host network", "host_top_processes": "Busiest other processes",
                "host_cpu_cores": "Host CPU per core"}
_HOST_SERIES = {
    "system_percent": "system", "job_percent": "this job", "used_bytes": "used", "available_bytes": "available",
    "job_rss_bytes": "job RSS", "read_bytes_per_s": "read", "write_bytes_per_s": "write",
    "recv_bytes_per_s": "received", "sent_bytes_per_s": "sent", "cpu_count": "cores",
    "runnable_threads": "runnable threads", "job_threads": "job threads",
}
# A unit written in the series name: "Read(MB/s)", "Hit Rate(%)", "KB", "MHz".
_PAREN_UNIT = re.compile(r"^(.*?)\s*\(([^()]+)\)\s*$")
_BARE_UNITS = {"KB", "MB", "GB", "MHz", "GHz", "W", "mW", "C", "%", "MB/s", "GB/s", "KB/s"}
# torch's DeviceType codes in memory rows (c10/core/DeviceType.h); 20, PrivateUse1, is torch_npu's NPU.
_DEVICE_TYPES = {0: "CPU", 1: "GPU", 6: "GPU", 9: "XLA", 12: "XPU", 13: "MPS", 15: "HPU", 19: "MTIA", 20: "NPU"}


def _unit_of_suffix(series: str) -> str | None:
    if series.endswith("_percent") or series.endswith("_pct"):
        return "percent"
    if series.endswith("_bytes_per_s"):
        return "bytes_per_s"
    if series.endswith("_bytes"):
        return "bytes"
    if series.endswith(("_count", "_threads")):
        return "count"
    return None


def _words(text: str) -> str:
    text = text.replace("_", " ").strip()
    # Only all-lowercase names are capitalised: "npu memory:PTA" keeps its own spelling.
    return text[:1].upper() + text[1:] if text and text == text.lower() else text


def counter_label(name: str | None, series: str | None) -> tuple[str, str | None]:
    """(label, unit) of one counter series; unit is one of UNITS, a short unit text, or None."""
    name, series = name or "", series or ""
    if name in _HOST_GROUPS:
        by_name = name in ("host_top_processes", "host_cpu_cores")  # the series is a process or a core
        unit = _unit_of_suffix(series) or ("percent" if by_name else None)
        label = _HOST_SERIES.get(series, series if by_name else _words(series))
        return f"{_HOST_GROUPS[name]}: {label}", unit
    unit = _unit_of_suffix(series)
    if unit is not None:
        base = series
        for suffix in ("_bytes_per_s", "_bytes", "_percent", "_pct", "_count"):
            base = base.removesuffix(suffix)
        part = _words(base)
        return (f"{_words(name)}: {part}" if part else _words(name)), unit
    m = _PAREN_UNIT.match(series)
    if m:
        part, text = m.group(1), m.group(2)
        unit = "percent" if text == "%" else text
        # "HBM 0/Read" with series "Read(MB/s)": the series repeats the name's last part.
        redundant = not part or part == name or name.rsplit("/", 1)[-1].strip() == part
        return (name if redundant else f"{name}: {part}"), unit
    if series in _BARE_UNITS:
        return name, "percent" if series == "%" else series
    if not series or series in ("value", name):
        return _words(name) if "_" in name else name, None
    return f"{_words(name) if '_' in name else name}: {series}", None


def device_label(device_type: int | None, device_id: int | None) -> str:
    """"CPU", "GPU 0", "NPU 1": what a memory row's device is called on the page."""
    kind = _DEVICE_TYPES.get(device_type, f"device type {device_type}") if device_type is not None else "device"
    if kind == "CPU" or device_id is None or device_id < 0:
        return kind
    return f"{kind} {device_id}"
