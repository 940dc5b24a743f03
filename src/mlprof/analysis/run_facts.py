"""The facts of a run that change its speed, and warnings when two compared runs differ in them.

Facts come from the ``metadata`` table (the trace's own keys, such as
``deviceProperties`` and ``distributedInfo``, and, for mlprof captures, the
manifest and ``profiler_metadata.json``) and, for the batch shape, from the
input shapes of the first forward op (``record_shapes``). A fact unknown on
either side is not compared.
"""

from __future__ import annotations

import json
from collections import Counter

from mlprof.analysis.advisor.context import AdvisorContext
from mlprof.tables.store import TableStore

__all__ = ["run_facts", "facts_from_metadata", "fact_warnings", "FACT_LABELS"]

# Fact -> what a warning calls it, in the order warnings are given.
FACT_LABELS = {
    "gpus": "GPUs",
    "cpu_model": "CPU model",
    "host": "host",
    "cpu_count": "CPU count",
    "platform": "platform",
    "world_size": "world size",
    "torch": "torch version",
    "cuda": "CUDA version",
    "profiler_level": "profiler level",
    "profiler_options": "profiler options",
    "threads": "thread settings",
    "torch_settings": "torch settings",
    "batch_shape": "batch shape (first forward op's inputs)",
}
_THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
_PROFILER_OPTIONS = ("activities", "record_shapes", "profile_memory", "with_stack", "with_modules", "with_flops")
_CUDA_KEYS = ("cuda_runtime_version", "cuda_driver_version", "cupti_version", "hip_runtime_version")


def _dict(value) -> dict:
    return value if isinstance(value, dict) else {}


def facts_from_metadata(meta: dict) -> dict:
    """Facts from decoded metadata (key -> JSON value); absent facts are left out."""
    facts: dict = {}
    devices = meta.get("deviceProperties")
    if isinstance(devices, list) and devices:
        names = Counter(str(_dict(d).get("name", "?")) for d in devices)
        facts["gpus"] = ", ".join(f"{k} x{v}" for k, v in sorted(names.items()))
    system = _dict(meta.get("profiler_metadata.system"))
    host = meta.get("capture.host") or system.get("host") or meta.get("host_name")
    if host:
        facts["host"] = str(host)
    if system.get("cpu_model"):  # when the collector records it
        facts["cpu_model"] = system["cpu_model"]
    cpus = system.get("cpu_affinity_count") or system.get("cpu_count")
    if cpus:
        facts["cpu_count"] = cpus
    if system.get("platform"):
        facts["platform"] = system["platform"]
    world = meta.get("capture.world_size") or _dict(meta.get("distributedInfo")).get("world_size")
    if world:
        facts["world_size"] = int(world)
    versions = _dict(meta.get("capture.versions"))
    if versions.get("torch"):
        facts["torch"] = versions["torch"]
    cuda = {k: meta[k] for k in _CUDA_KEYS if meta.get(k) not in (None, "")}
    if cuda:
        facts["cuda"] = ", ".join(f"{k} {v}" for k, v in cuda.items())
    config = _dict(meta.get("capture.config"))
    level = _dict(config.get("experimental_config")).get("profiler_level")
    if level:
        facts["profiler_level"] = level
    options = {k: config[k] for k in _PROFILER_OPTIONS if k in config}
    if options:
        facts["profiler_options"] = ", ".join(f"{k}={v}" for k, v in options.items())
    env = _dict(meta.get("profiler_metadata.environment"))
    threads = {k: env[k] for k in _THREAD_VARIABLES if k in env}
    if "torch_num_threads" in system:
        threads["torch threads"] = system["torch_num_threads"]
    if threads:
        facts["threads"] = ", ".join(f"{k}={v}" for k, v in threads.items())
    settings = _torch_settings(meta.get("profiler_metadata.torch_state"))
    if settings:
        facts["torch_settings"] = settings
    return facts


# The process-wide torch settings that change speed (collect/torch_state.py), as the first window opened.
_TORCH_SETTINGS = ("anomaly_enabled", "deterministic_algorithms", "float32_matmul_precision",
                   "cuda_matmul_allow_tf32", "cudnn_benchmark", "cudnn_deterministic")


def _torch_settings(windows) -> str | None:
    first = _dict(windows[0]).get("at_start") if isinstance(windows, list) and windows else None
    known = {k: first[k] for k in _TORCH_SETTINGS if k in _dict(first)}
    return ", ".join(f"{k}={v}" for k, v in known.items()) or None


_SHAPED = "h.input_dims IS NOT NULL AND h.input_dims NOT IN ('[]', '[[]]')"


def _batch_shape(store: TableStore) -> str | None:
    """Input shapes of the first op with shapes in forward time (any forward span: the first one may be
    a sliver before a GC pause or a Python gap)."""
    if not store.rows(f"SELECT 1 FROM host_ops h WHERE {_SHAPED} LIMIT 1"):
        return None  # recorded without shapes
    spans = store.rows("SELECT window_index, start_ns, end_ns FROM phase_spans WHERE view = 'host' "
                       "AND phase = 'forward' ORDER BY window_index, start_ns")
    # The host spans of one thread do not overlap, so the forward span an op starts in is the last
    # one starting before it: an ASOF join (sorted, linear), not a range join over every pair
    # (2.6 s on 200K ops, minutes on millions). The first op is in the first spans: they are
    # searched a few at a time, then more, in time order (over every op at once, 1.3 s on 4.5M).
    first, size = 0, 16
    while first < len(spans):
        window = spans[first][0]
        last = first
        while last < len(spans) and last - first < size and spans[last][0] == window:
            last += 1
        lo, hi = spans[first][1], max(end for _, _, end in spans[first:last])
        rows = store.rows(f"""
            SELECT h.name, h.input_dims FROM (SELECT * FROM host_ops WHERE window_index = ? AND start_ns >= ?
                                              AND start_ns < ?) h
            ASOF JOIN (SELECT window_index, tid, start_ns, end_ns FROM phase_spans
                       WHERE view = 'host' AND phase = 'forward' AND window_index = ? AND start_ns >= ?
                         AND start_ns <= ?) p
              ON h.window_index = p.window_index AND h.tid = p.tid AND h.start_ns >= p.start_ns
            WHERE h.start_ns < p.end_ns AND {_SHAPED}
            ORDER BY h.window_index, h.start_ns, h.depth, h.op_id LIMIT 1""",
                          [window, lo, hi, window, lo, spans[last - 1][1]])
        if rows:
            return f"{rows[0][0]} {rows[0][1]}"
        first, size = last, size * 4
    return None


def run_facts(store: TableStore) -> dict:
    """The facts of one parsed run (see :data:`FACT_LABELS`)."""
    facts = facts_from_metadata(AdvisorContext(store).metadata)
    shape = _batch_shape(store)
    if shape:
        facts["batch_shape"] = shape
    return facts


def _show(value) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def fact_warnings(base: dict, new: dict) -> list[str]:
    """One line per fact known on both sides whose values differ."""
    out = []
    for key, label in FACT_LABELS.items():
        if key in base and key in new and base[key] != new[key]:
            out.append(f"runs differ in {label}: base {_show(base[key])}, new {_show(new[key])}")
    return out
