"""Helpers for export tests: where the shared real traces are."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
SHARED_TRACES = REPO_ROOT.parent / "shared" / "data" / "traces"
GPU_TRACES = [
    "nccl_parser_config/nccl_data.json.gz",
    "ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",
    "trace_filter/sampled_rank-0.json.gz",
    "trace_filter/sampled_rank-1.json.gz",
    "amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz",
    "critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz",
]


@pytest.fixture
def shared_traces() -> Path:
    if not SHARED_TRACES.is_dir():
        pytest.skip(f"shared traces not found at {SHARED_TRACES}")
    return SHARED_TRACES
