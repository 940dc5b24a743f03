"""Where the tests find the project's real traces: defined once for every test package.

Importable as ``shared_data`` because pytest puts tests/ (the first directory
without an __init__.py) on sys.path.
"""

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_TRACES = REPO_ROOT.parent / "shared" / "data" / "traces"
# The GPU traces (NVIDIA and AMD) among them, relative to SHARED_TRACES.
GPU_TRACES = [
    "nccl_parser_config/nccl_data.json.gz",
    "ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",
    "trace_filter/sampled_rank-0.json.gz",
    "trace_filter/sampled_rank-1.json.gz",
    "amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz",
    "critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz",
]
# A real GPU trace of our own (tests/data/make_h200_trace.py): 4 steps of a small DDP transformer on one
# H200, 25,313 events (kernels, runtime and driver calls, ac2g and fwdbwd flows, allocations).
H200_TRACE = REPO_ROOT / "tests" / "data" / "h200_ddp_transformer.pt.trace.json.gz"
# Real torch_npu (Ascend PyTorch Profiler) output: text export (level0, level1) and SQLite export (level1).
SHARED_ASCEND = REPO_ROOT.parent / "shared" / "data" / "ascend" / "alexnet_ddp_910b"
