"""Names and units people read, for things the tables store under internal names.

Counters are stored as (name, series) with the unit only in the series name
(``host_cpu``/``system_percent``, Ascend's ``HBM 0``/``Read(MB/s)``); memory
rows carry Kineto's device type code. The dashboard shows "Host CPU: system"
in percent and "GPU 0", never ``device type 1 / device 0``.
"""

from __future__ import annotations

import re


__all__ = ["counter_label", "counter_display", "device_label", "UNITS", "ID_SERIES"]

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


# Series that identify what a counter measures rather than measure it: Ascend's bandwidth counters carry
# the accelerator's id (`acc_id`, a constant 27) beside their value; drawn, it was a flat line of "27 B".
ID_SERIES = {"acc_id"}
# Byte units written in Ascend's series names, as what the browser scales (KiB, MiB, ...) and their factor.
# torch_npu's KB and MB are binary (memory_record.csv's MB times 2**20 is the allocator's byte count).
_BYTE_UNITS = {"KB": ("bytes", 1 << 10), "MB": ("bytes", 1 << 20), "GB": ("bytes", 1 << 30),
               "KB/s": ("bytes_per_s", 1 << 10), "MB/s": ("bytes_per_s", 1 << 20), "GB/s": ("bytes_per_s", 1 << 30)}


def counter_display(name: str | None, series: str | None, values) -> tuple[str, str | None, float]:
    """(label, unit, factor) a chart draws a counter series with: ``value * factor`` in ``unit``.

    Byte units become bytes (an HBM axis ran to 2,500,000 "KB"); a hit rate "(%)" whose samples all lie
    within 0..1 is a fraction (Ascend's LLC "Hit Rate(%)" is 0.775..0.927, drawn flat at 0 on a 0-100%
    axis) and is drawn times 100.
    """
    label, unit = counter_label(name, series)
    if unit in _BYTE_UNITS:
        unit, factor = _BYTE_UNITS[unit]
        return label, unit, float(factor)
    # Only hit rates: a real percent series may sit below 1% for a whole run.
    if unit == "percent" and "Hit Rate" in (series or ""):
        finite = [v for v in values if v is not None]
        if finite and max(finite) <= 1.0 and min(finite) >= 0.0 and max(finite) > 0.0:
            return label, unit, 100.0
    return label, unit, 1.0


def device_label(device_type: int | None, device_id: int | None) -> str:
    """"CPU", "GPU 0", "NPU 1": what a memory row's device is called on the page."""
    kind = _DEVICE_TYPES.get(device_type, f"device type {device_type}") if device_type is not None else "device"
    if kind == "CPU" or device_id is None or device_id < 0:
        return kind
    return f"{kind} {device_id}"
