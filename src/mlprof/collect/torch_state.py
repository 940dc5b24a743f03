"""The torch settings that change speed, read when a window opens and again when it closes.

Debug modes left on (autograd anomaly detection, deterministic algorithms)
and backend switches (cudnn.benchmark, TF32) make the same code several times
slower or faster, and nothing in the trace says which were on. So each window
records them (profiler_metadata.json ``torch_state``, docs/capture_format.md)
and the advisor's configuration rules read them (analysis/advisor/rules_config.py).

Read on the training thread (the window hooks run there): grad mode and
inference mode are per thread, the rest is process-wide. Each read is 14
plain getters, 16 us together (measured on the project's busy 2-core VM), twice
a window; torch is taken from
``sys.modules`` (never imported here) and any getter an older or newer torch
lacks is left out rather than failing the window.
"""

from __future__ import annotations

import sys
from typing import Any, Callable

__all__ = ["torch_state", "state_changes", "window_state"]


def _getters(torch: Any) -> dict[str, Callable[[], Any]]:
    backends = getattr(torch, "backends", None)
    cudnn = getattr(backends, "cudnn", None)
    matmul = getattr(getattr(backends, "cuda", None), "matmul", None)
    return {
        "anomaly_enabled": torch.is_anomaly_enabled,
        "anomaly_check_nan": torch.is_anomaly_check_nan_enabled,
        "deterministic_algorithms": torch.are_deterministic_algorithms_enabled,
        "deterministic_warn_only": torch.is_deterministic_algorithms_warn_only_enabled,
        "grad_enabled": torch.is_grad_enabled,
        "inference_mode": torch.is_inference_mode_enabled,
        "num_threads": torch.get_num_threads,
        "num_interop_threads": torch.get_num_interop_threads,
        "float32_matmul_precision": torch.get_float32_matmul_precision,
        "cuda_matmul_allow_tf32": lambda: matmul.allow_tf32,
        "cudnn_enabled": lambda: cudnn.enabled,
        "cudnn_benchmark": lambda: cudnn.benchmark,
        "cudnn_deterministic": lambda: cudnn.deterministic,
        "cudnn_allow_tf32": lambda: cudnn.allow_tf32,
    }


def torch_state() -> dict[str, Any]:
    """The speed-changing torch settings now ({} when torch is not imported)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return {}
    state: dict[str, Any] = {}
    for key, get in _getters(torch).items():
        try:
            value = get()
        except Exception:  # a getter this torch lacks (or one that raises) is left out
            continue
        if isinstance(value, (bool, int, float, str)):
            state[key] = value
    return state


def state_changes(before: dict[str, Any], after: dict[str, Any]) -> dict[str, list[Any]]:
    """{key: [at window start, at window end]} for the settings that changed in between."""
    return {key: [before.get(key), after.get(key)] for key in sorted(set(before) | set(after))
            if before.get(key) != after.get(key)}


def window_state(window_index: int, at_start: dict[str, Any], at_end: dict[str, Any]) -> dict[str, Any]:
    """One window's entry of profiler_metadata.json's ``torch_state`` list."""
    return {"window": window_index, "at_start": at_start, "changed": state_changes(at_start, at_end)}
