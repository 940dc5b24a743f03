"""What op and call names mean: the one list of name patterns.

Steps (ProfilerStep#N), module frames (nn.Module:), collectives (per framework
and device), data loading, the optimizer, backward nodes, kernel launches and
synchronising calls are recognised by their names in
the parser (phases, collective names), the analyses (cluster, jobs) and the
advisor's rules. Each kind is spelled here once, as a Python test and, where
SQL reads it, as the SQL condition derived from the same text, so an op never
counts as communication for one analysis and not for another.
"""

from __future__ import annotations

import re

from mlprof.capture.trace_names import STEP_EVENT_PREFIX

__all__ = [
    "STEP_EVENT_PREFIX", "STEP_SPAN", "is_step_span", "step_span_sql", "MODULE_FRAME_PREFIX", "is_module_frame",
    "module_frame_sql", "TENSOR_CORE_KERNEL_REGEX", "tensor_core_kernel_sql", "COMPILE_SQL",
    "COMMUNICATION_BACKENDS", "BACKEND_COLLECTIVE", "BACKEND_COLLECTIVE_REGEX", "HOST_COMMUNICATION",
    "HOST_COMMUNICATION_REGEX", "is_host_communication", "COMMUNICATION_KERNEL", "COLLECTIVE_KINDS", "collective_kind",
    "DATA_LOADING_MARK", "is_data_loading", "data_loading_sql", "data_loader_kind", "OPTIMIZER_PREFIX", "is_optimizer",
    "BACKWARD_NODE_PREFIX", "backward_node_sql", "is_backward", "SYNC_CALLS", "is_sync_call",
    "KERNEL_LAUNCH_SQL", "ANNOTATION_WORDS",
]

# A training step as torch's profiler records it: ProfilerStep#12 (the prefix is the capture's own spelling,
# which mlprof's steps are written under too).
STEP_SPAN = re.compile(rf"^{re.escape(STEP_EVENT_PREFIX)}(\d+)$")


def is_step_span(name: str) -> bool:
    return name.startswith(STEP_EVENT_PREFIX)


def step_span_sql(column: str = "name") -> str:
    return f"{column} LIKE '{STEP_EVENT_PREFIX}%'"


# A module's forward as torch's Python tracer records it (with_stack): "nn.Module: Linear_0".
MODULE_FRAME_PREFIX = "nn.Module:"


def is_module_frame(name: str) -> bool:
    return name.startswith(MODULE_FRAME_PREFIX)


def module_frame_sql(column: str = "name") -> str:
    return f"{column} LIKE '{MODULE_FRAME_PREFIX}%'"


# torch.compile compiling (Dynamo's frame conversion, Inductor's compile_fx), as host spans; nested spans of
# these names are one compilation seen at several levels.
COMPILE_SQL = ("(name LIKE '%_compile.compile_inner%' OR name LIKE 'TorchDynamo%compil%' OR name LIKE 'compile_fx%' "
               "OR name LIKE '%CompileFunction%' OR name LIKE 'dynamo%compile%' "
               "OR name = 'torch._dynamo.convert_frame._compile')")

# Kernels that run on the matrix units (NVIDIA Tensor Cores, AMD Matrix Cores), by the names their libraries give
# them: CUTLASS "tensorop" and cuDNN/cuBLAS "xmma" kernels, the MMA instruction families (hmma, imma, wmma,
# Hopper's gmma) and their tile shapes in cuBLAS names (s884, h1688, s16816, i8816...), fused attention (fmha,
# flash_fwd/flash_bwd), and rocBLAS/hipBLASLt Tensile kernels built on MFMA instructions (_MI16x16x1_).
# FP32 SIMT kernels (volta_sgemm, ampere_sgemm, scudnn) match none of them.
TENSOR_CORE_KERNEL_REGEX = (r"(?i)(tensorop|xmma|[hiwg]mma|[a-z](884|1688|16816|8816)[a-z_]|fmha|flash_(fwd|bwd)"
                            r"|mfma|_MI\d+x\d+x\d+)")


def tensor_core_kernel_sql(column: str = "name") -> str:
    return f"regexp_matches({column}, '{TENSOR_CORE_KERNEL_REGEX}')"


# Communication backends whose host ops torch names `<backend>:<collective>`
# (nccl:all_reduce, gloo:broadcast, hccl:allreduce on Ascend, xccl on Intel GPUs).
COMMUNICATION_BACKENDS = ("nccl", "rccl", "gloo", "hccl", "mpi", "ucc", "xccl")

# The host op a backend runs one collective in: one per collective, so it names
# the collective and is what the cluster analysis matches across ranks.
BACKEND_COLLECTIVE_REGEX = rf"^({'|'.join(COMMUNICATION_BACKENDS)}):\w"
BACKEND_COLLECTIVE = re.compile(BACKEND_COLLECTIVE_REGEX)

# Every host span that is communication: the backend's op, the c10d op around
# it (c10d::allreduce_), torch's record_param_comms, and torch_npu's Hccl* ops
# (HcclAllreduce). Nested ones are one collective seen at several levels.
HOST_COMMUNICATION_REGEX = (rf"^(({'|'.join(COMMUNICATION_BACKENDS)}):\w|c10d::?\w|record_param_comms"
                            r"|Hccl[A-Z])")
HOST_COMMUNICATION = re.compile(HOST_COMMUNICATION_REGEX)


def is_host_communication(name: str) -> bool:
    return HOST_COMMUNICATION.match(name) is not None


# Device kernels that move data between ranks: NCCL's ncclKernel_* /
# ncclDevKernel_*, RCCL's, and kernels named after their collective.
COMMUNICATION_KERNEL = re.compile(r"nccl|rccl|c10d::|all_?reduce|all_?gather|reduce_?scatter", re.I)

# What a collective does, whoever named it (nccl:all_reduce, c10d::allreduce_,
# ncclKernel_AllReduce_RING_LL_Sum_float, ncclDevKernel_SendRecv, HCCL's hcom_allReduce__586_0_1,
# hcom_receive_, HcclAlltoAllV): the canonical kind and its spellings, most specific first
# (reduce_scatter before reduce, all_gather before gather, alltoallv before alltoall).
COLLECTIVE_KINDS = (
    ("reducescatter", r"reduce_?scatter"), ("allreduce", r"all_?reduce"), ("allgather", r"all_?gather"),
    ("alltoallv", r"all_?to_?all_?v"), ("alltoall", r"all_?to_?all"), ("broadcast", r"broadcast|bcast"),
    ("batchsendrecv", r"batch_?send_?recv"), ("sendrecv", r"send_?recv"), ("barrier", r"barrier"),
    ("send", r"send"), ("recv", r"recv|receive"), ("reduce", r"reduce"), ("gather", r"gather"),
    ("scatter", r"scatter"),
)
_COLLECTIVE_KIND_RES = tuple((kind, re.compile(pattern, re.I)) for kind, pattern in COLLECTIVE_KINDS)


def collective_kind(name: str | None) -> str | None:
    """The canonical kind of the collective ``name`` spells (``allreduce``, ``alltoallv``, ``recv`` ...), or None."""
    if not name:
        return None
    for kind, pattern in _COLLECTIVE_KIND_RES:
        if pattern.search(name):
            return kind
    return None


# The DataLoader's iteration op (enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__)
# and any other span named after it.
DATA_LOADING_MARK = "DataLoader"


def is_data_loading(name: str) -> bool:
    return DATA_LOADING_MARK in name


def data_loading_sql(column: str = "name") -> str:
    return f"{column} LIKE '%{DATA_LOADING_MARK}%'"


# The DataLoader's iterator class says where batches are loaded: in the training process, or in workers.
_LOADER_KINDS = (("_SingleProcessDataLoaderIter", "single_process"), ("_MultiProcessingDataLoaderIter", "workers"))


def data_loader_kind(name: str) -> str | None:
    """"single_process" or "workers" for a DataLoader iteration op, else None."""
    return next((kind for mark, kind in _LOADER_KINDS if mark in name), None)


# Optimizer.step#SGD.step, Optimizer.zero_grad#SGD.zero_grad
OPTIMIZER_PREFIX = "Optimizer."


def is_optimizer(name: str) -> bool:
    return name.startswith(OPTIMIZER_PREFIX)


# One autograd node run by the backward engine: autograd::engine::evaluate_function: MmBackward0
BACKWARD_NODE_PREFIX = "autograd::engine::evaluate_function"


def backward_node_sql(column: str = "name") -> str:
    return f"{column} LIKE '{BACKWARD_NODE_PREFIX}:%'"


def is_backward(name: str) -> bool:
    """A backward node, or a backward function called outside the engine (MmBackward0)."""
    return name.startswith(BACKWARD_NODE_PREFIX) or name.endswith(("Backward0", "Backward1"))


# Runtime calls that block the host until the device has drained (or an event fired).
SYNC_CALLS = ("cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventSynchronize",
              "cudaMemcpy", "hipDeviceSynchronize", "hipStreamSynchronize", "hipEventSynchronize", "hipMemcpy",
              # Ascend NPU (CANN runtime calls of a torch_npu import, docs/ascend.md)
              "AscendCL@aclrtSynchronizeDevice", "AscendCL@aclrtSynchronizeStream",
              "AscendCL@aclrtSynchronizeStreamWithTimeout", "AscendCL@aclrtSynchronizeEvent")


def is_sync_call(name: str) -> bool:
    """A device runtime call that blocks the host until the device has drained."""
    return name in SYNC_CALLS


# Runtime calls that launch device work: cudaLaunchKernel, cuLaunchKernel, hipLaunchKernel,
# hipExtModuleLaunchKernel, cudaGraphLaunch, and Ascend's aclnn* op launches and CANN's Node@launch.
KERNEL_LAUNCH_SQL = ("(name LIKE '%LaunchKernel%' OR name LIKE 'cuLaunch%' OR name LIKE 'hipLaunch%' "
                     "OR name LIKE 'cudaGraphLaunch%' OR name LIKE 'aclnn%' OR name = 'Node@launch')")

# Words of a user annotation or mstx range that name a phase (`## forward ##`,
# `load_batch`, `optimizer step`, `all_reduce grads`); neighbouring words are
# also read joined ("load batch" reads "loadbatch").
ANNOTATION_WORDS = (
    ("data_loading", frozenset({"dataloader", "dataloading", "loadbatch", "loaddata", "getbatch", "nextbatch",
                                "fetchbatch", "dataload", "prefetch", "inputpipeline"})),
    ("optimizer", frozenset({"optimizer", "optim", "optimizerstep", "optstep", "zerograd"})),
    ("backward", frozenset({"backward", "bwd", "backprop"})),
    ("forward", frozenset({"forward", "fwd"})),
    ("communication", frozenset({"allreduce", "allgather", "reducescatter", "alltoall", "broadcast", "barrier",
                                 "comm", "communication"})),
)
