"""The job facts that change performance: environment variables, host, rank."""

from __future__ import annotations

import os
import platform
import re
import socket
import sys
from typing import Any, Mapping

__all__ = ["CAPTURED_VARIABLES", "CAPTURED_PREFIXES", "performance_environment", "rank_info", "system_info"]

# Variables read verbatim when set.
CAPTURED_VARIABLES = (
    "CUDA_VISIBLE_DEVICES", "CUDA_LAUNCH_BLOCKING", "CUDA_DEVICE_MAX_CONNECTIONS",
    "CUBLAS_WORKSPACE_CONFIG", "NVIDIA_TF32_OVERRIDE",
    "OMP_NUM_THREADS", "OMP_PROC_BIND", "OMP_PLACES", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
    "PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_HIP_ALLOC_CONF", "PYTORCH_NO_CUDA_MEMORY_CACHING",
    "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "NODE_RANK",
    "MASTER_ADDR", "MASTER_PORT", "LD_PRELOAD", "MALLOC_CONF",
    # Debug switches that slow a job down when left on (analysis/advisor/rules_config.py reads them).
    "TORCH_SHOW_CPP_STACKTRACES", "TORCH_CPP_LOG_LEVEL", "TORCH_LOGS", "TORCH_USE_CUDA_DSA",
    "PYTORCH_ALLOC_CONF", "PYTORCH_NPU_ALLOC_CONF", "PYTORCH_JIT",
    "PYTHONDEVMODE", "PYTHONTRACEMALLOC", "PYTHONMALLOC",
)
# Families of variables, captured whenever a name starts with one of these.
CAPTURED_PREFIXES = (
    "NCCL_", "TORCH_NCCL_", "TORCH_DISTRIBUTED_", "TORCHINDUCTOR_", "TORCH_COMPILE_",
    "TORCHDYNAMO_", "GLOO_", "KMP_", "GOMP_", "MKL_", "CUDNN_", "HIP_", "HSA_", "ROCR_", "HCCL_", "ASCEND_",
)
# Never record values that look like credentials, whatever their prefix.
_SECRET = re.compile(r"TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|_KEY$|^KEY_|AUTH", re.IGNORECASE)


def performance_environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    env = os.environ if environ is None else environ
    found = {}
    for name in sorted(env):
        if _SECRET.search(name):
            continue
        if name in CAPTURED_VARIABLES or name.startswith(CAPTURED_PREFIXES):
            found[name] = env[name]
    return found


def _env_int(name: str, default: int) -> int:
    try:
        return int(os.environ.get(name, default))
    except ValueError:
        return default


def rank_info() -> dict[str, int]:
    """Rank and world size from torch.distributed when initialised, else the environment."""
    info = {
        "rank": _env_int("RANK", 0),
        "world_size": _env_int("WORLD_SIZE", 1),
        "local_rank": _env_int("LOCAL_RANK", 0),
    }
    dist = sys.modules.get("torch.distributed")
    try:
        if dist is not None and dist.is_available() and dist.is_initialized():
            info["rank"] = dist.get_rank()
            info["world_size"] = dist.get_world_size()
    except Exception:  # an odd backend must not stop collection
        pass
    return info


def system_info() -> dict[str, Any]:
    info: dict[str, Any] = {
        "host": socket.gethostname(),
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "python": sys.version.split()[0],
    }
    try:
        info["cpu_affinity_count"] = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        pass
    torch = sys.modules.get("torch")
    if torch is not None:
        info["torch_num_threads"] = torch.get_num_threads()
        info["torch_num_interop_threads"] = torch.get_num_interop_threads()
        info["cuda_device_count"] = torch.cuda.device_count() if torch.cuda.is_available() else 0
    return info
