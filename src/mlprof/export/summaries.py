"""The summary files (CSV, or JSON with --summary-format json): their columns, once.

Each :class:`Summary` names its file, documents every column with its unit,
and says how to get its rows from the tables. Times in the files are
microseconds with ns precision (three decimals), written exactly from the
integer ns of the tables; absolute times are wall-clock µs since the epoch.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from mlprof.analysis import api_statistic, kernel_statistic, op_statistic, operator_details, step_breakdown
from mlprof.analysis.call_sites import call_sites
from mlprof.analysis.devices import run_device
from mlprof.analysis.modules import module_tree
from mlprof.analysis.steps import data_loading_spans
from mlprof.analysis.host import host_resources
from mlprof.analysis.memory import memory_record, operator_memory
from mlprof.analysis.monitor import job_step_rows
from mlprof.analysis.training import scalar_rows
from mlprof.tables.store import TableStore

__all__ = ["SummaryColumn", "Summary", "SUMMARIES"]


@dataclass(frozen=True)
class SummaryColumn:
    name: str  # header in the file
    source: str  # key in the analysis row
    unit: str  # "us" (converted from ns), "bytes", "%", "" (plain)
    doc: str


@dataclass(frozen=True)
class Summary:
    stem: str  # file name without extension
    doc: str
    columns: tuple[SummaryColumn, ...]
    # Files of a row per event (kernels, allocations) stream their rows; the others are short lists.
    rows: Callable[[TableStore, int | None], Iterable[dict]]


def _c(name: str, source: str, unit: str, doc: str) -> SummaryColumn:
    return SummaryColumn(name, source, unit, doc)


def _steps(store: TableStore, step: int | None) -> list[dict]:
    rows = [vars(b) for b in step_breakdown(store)]
    return [r for r in rows if step is None or r["step"] == step]


def _kernel_details(store: TableStore, step: int | None) -> Iterator[dict]:
    conds = [] if step is None else ["d.step = ?"]
    if run_device(store).kind == "npu":
        # torch_npu's kernel_details.csv lists kernels (compute tasks and collectives) only: its
        # copies (MEMCPY_ASYNC: PCIE_DMA_SQE, SDMA_SQE) stay in the timeline and in device_ops, as
        # memcpy, and out of this file, so that its rows are the tool's (191 of 215 on alexnet_ddp_910b).
        conds.append("d.kind = 'kernel'")
    where = f"WHERE {' AND '.join(conds)}" if conds else ""
    return store.iter_dicts(f"""
        SELECT d.step, d.name, d.kind, d.device, d.stream, d.start_ns, d.dur_ns, d.grid, d.block,
               d.size_bytes, d.registers_per_thread, d.shared_memory_bytes, d.occupancy_pct,
               d.is_communication, h.name AS host_op, d.correlation
        FROM device_ops d LEFT JOIN host_ops h ON h.op_id = d.host_op_id {where}
        ORDER BY d.start_ns, d.device_op_id""", [] if step is None else [step])


def _data_preprocess(store: TableStore, step: int | None) -> list[dict]:
    return data_loading_spans(store, step)


def _module_statistic(store: TableStore, step: int | None) -> list[dict]:
    return [m.to_dict() for m in module_tree(store, step)]


def _call_sites(store: TableStore, step: int | None) -> list[dict]:
    return call_sites(store, step=step)


_STAT = (
    _c("Count", "count", "", "number of calls"),
    _c("Total Time(us)", "total_ns", "us", "sum of durations"),
    _c("Avg Time(us)", "avg_ns", "us", "mean duration"),
    _c("Min Time(us)", "min_ns", "us", "shortest call"),
    _c("Max Time(us)", "max_ns", "us", "longest call"),
    _c("Ratio(%)", "ratio_pct", "%", "share of the total time of the file's rows"),
)

SUMMARIES: tuple[Summary, ...] = (
    Summary("step_trace_time", "One row per step: device breakdown (GPU traces) and host breakdown.", (
        _c("Step", "step", "", "step number (ProfilerStep#N)"),
        _c("Window", "window", "", "capture window"),
        _c("Start(us)", "start_ns", "us", "step start, wall clock"),
        _c("Duration(us)", "dur_ns", "us", "step time"),
        _c("Computing(us)", "computing_ns", "us", "device busy with non-communication work (empty on CPU-only traces)"),
        _c("Communication(us)", "communication_ns", "us", "device busy with communication kernels"),
        _c("Overlapped(us)", "overlapped_ns", "us", "communication hidden under computing"),
        _c("Communication(Not Overlapped)(us)", "communication_not_overlapped_ns", "us",
           "communication not hidden under computing"),
        _c("Free(us)", "free_ns", "us", "device idle after the step's first device op"),
        _c("Preparing(us)", "preparing_ns", "us", "step start to the first device op"),
        _c("Idle Data Loading(us)", "idle_data_loading_ns", "us", "device idle while the host loaded data"),
        _c("Idle Synchronization(us)", "idle_synchronization_ns", "us",
           "device idle after the host blocked in a synchronizing call"),
        _c("Idle Python(us)", "idle_python_ns", "us", "device idle while the host ran Python outside ops"),
        _c("Idle GC(us)", "idle_gc_ns", "us", "device idle during a garbage-collector pause"),
        _c("Idle Launch(us)", "idle_launch_ns", "us", "device idle while the host was busy issuing work"),
        _c("Idle Communication(us)", "idle_communication_ns", "us", "device idle while the host communicated"),
        _c("Data Loading(us)", "data_loading_ns", "us", "host: data loading phase (DataLoader iteration, load annotations)"),
        _c("Forward(us)", "forward_ns", "us", "host: forward phase (module calls, ops before backward)"),
        _c("Backward(us)", "backward_ns", "us", "host: backward phase (autograd engine)"),
        _c("Optimizer(us)", "optimizer_ns", "us", "host: optimizer phase (Optimizer.step / zero_grad)"),
        _c("Host Communication(us)", "host_communication_ns", "us", "host: collectives run by the host (gloo/nccl/c10d)"),
        _c("GC(us)", "gc_ns", "us", "host: Python garbage-collector pauses"),
        _c("Python(us)", "python_ns", "us", "host: Python outside any profiled op"),
        _c("Other(us)", "other_ns", "us", "host: ops after the backward under no phase (logging, metrics)"),
    ), _steps),
    Summary("op_statistic", "Framework ops grouped by name (host self time, as torch's key_averages()).", (
        _c("Op Name", "name", "", "op name"),
        _c("Count", "count", "", "number of calls"),
        _c("Total Self Time(us)", "host_self_ns", "us", "host time excluding nested ops and runtime calls"),
        _c("Avg Self Time(us)", "avg_self_ns", "us", "mean host self time"),
        _c("Min Self Time(us)", "min_self_ns", "us", "smallest host self time"),
        _c("Max Self Time(us)", "max_self_ns", "us", "largest host self time"),
        _c("Total Time(us)", "host_total_ns", "us", "host time including nested ops"),
        _c("Device Self Time(us)", "device_self_ns", "us", "device time of ops launched directly"),
        _c("Device Total Time(us)", "device_total_ns", "us", "device time launched by the op or nested ops"),
        _c("Ratio(%)", "ratio_pct", "%", "share of all host self time"),
    ), op_statistic),
    Summary("operator_details", "Framework ops grouped by name and input shapes.", (
        _c("Name", "name", "", "op name"),
        _c("Input Shapes", "input_dims", "", "input shapes (JSON), when record_shapes was on"),
        _c("Input Types", "input_types", "", "input dtypes (JSON)"),
        _c("Count", "count", "", "number of calls"),
        _c("Host Self Duration(us)", "host_self_ns", "us", "host self time"),
        _c("Host Total Duration(us)", "host_total_ns", "us", "host total time"),
        _c("Device Self Duration(us)", "device_self_ns", "us", "device time of ops launched directly"),
        _c("Device Total Duration(us)", "device_total_ns", "us", "device time launched by the op or nested ops"),
    ), operator_details),
    Summary("kernel_details", "Every device task (kernel, memcpy, memset, sync).", (
        _c("Step", "step", "", "step of the launch"),
        _c("Name", "name", "", "kernel or copy name"),
        _c("Type", "kind", "", "kernel, memcpy, memset or sync"),
        _c("Device", "device", "", "device index"),
        _c("Stream", "stream", "", "stream id"),
        _c("Start Time(us)", "start_ns", "us", "start, wall clock"),
        _c("Duration(us)", "dur_ns", "us", "duration"),
        _c("Grid", "grid", "", "launch grid"),
        _c("Block", "block", "", "thread block"),
        _c("Size(bytes)", "size_bytes", "bytes", "bytes copied or set"),
        _c("Registers Per Thread", "registers_per_thread", "", "registers per thread"),
        _c("Shared Memory(bytes)", "shared_memory_bytes", "bytes", "shared memory per block"),
        _c("Achieved Occupancy(%)", "occupancy_pct", "%", "estimated achieved occupancy"),
        _c("Communication", "is_communication", "", "true for communication kernels"),
        _c("Host Op", "host_op", "", "framework op that launched it"),
        _c("Correlation", "correlation", "", "correlation id of the launch"),
    ), _kernel_details),
    Summary("kernel_statistic", "Device tasks grouped by name.", (
        _c("Name", "name", "", "kernel or copy name"),
        _c("Type", "kind", "", "kernel, memcpy or memset"),
    ) + _STAT, kernel_statistic),
    Summary("api_statistic", "Device runtime API calls grouped by name.", (
        _c("API Name", "name", "", "runtime/driver API"),
    ) + _STAT, api_statistic),
    Summary("memory_record", "Allocator totals after every allocation or free.", (
        _c("Time(us)", "ts_ns", "us", "wall clock"),
        _c("Device Type", "device_type", "", "Kineto device type (0 CPU, 1 CUDA)"),
        _c("Device Id", "device_id", "", "device index (-1 CPU)"),
        _c("Allocated(bytes)", "total_allocated_bytes", "bytes", "allocated total"),
        _c("Reserved(bytes)", "total_reserved_bytes", "bytes", "reserved total"),
    ), functools.partial(memory_record, stream=True)),
    Summary("operator_memory", "Each allocation with its op, size and lifetime.", (
        _c("Name", "op_name", "", "op that allocated (empty when outside any op)"),
        _c("Size(bytes)", "size_bytes", "bytes", "bytes allocated"),
        _c("Allocation Time(us)", "alloc_ns", "us", "wall clock"),
        _c("Release Time(us)", "release_ns", "us", "wall clock (empty when not freed in the trace)"),
        _c("Duration(us)", "lifetime_ns", "us", "release - allocation"),
        _c("Device Type", "device_type", "", "Kineto device type"),
        _c("Device Id", "device_id", "", "device index"),
    ), functools.partial(operator_memory, stream=True)),
    Summary("data_preprocess", "DataLoader iterations (host).", (
        _c("Step", "step", "", "step"),
        _c("Name", "name", "", "DataLoader op"),
        _c("Thread", "tid", "", "thread id"),
        _c("Start Time(us)", "start_ns", "us", "wall clock"),
        _c("Duration(us)", "dur_ns", "us", "duration"),
    ), _data_preprocess),
    Summary("module_statistic", "nn.Module tree (mlprof's module hooks): forward, device and backward time.", (
        _c("Module", "path", "", "module path, e.g. Net.layers.0"),
        _c("Type", "module_type", "", "class name"),
        _c("Depth", "depth", "", "nesting depth, 0 = outermost"),
        _c("Calls", "calls", "", "forward calls"),
        _c("Forward Total(us)", "total_ns", "us", "host time of the forward, child modules included"),
        _c("Forward Self(us)", "self_ns", "us", "host time of the forward outside child modules"),
        _c("Device Total(us)", "device_total_ns", "us", "device time of work launched in the forward, children included"),
        _c("Device Self(us)", "device_self_ns", "us", "device time of work launched outside child modules"),
        _c("Backward Total(us)", "backward_total_ns", "us", "host time of the backward nodes its forward created"),
        _c("Backward Self(us)", "backward_self_ns", "us", "the same, outside child modules"),
    ), _module_statistic),
    Summary("call_sites", "The user's Python lines behind each host phase (sampled stacks).", (
        _c("Phase", "phase", "", "host phase of the samples (phase_spans)"),
        _c("Call Site", "call_site", "", "innermost frame of the user's code: file:line function"),
        _c("Leaf", "leaf", "", "most frequent innermost frame of any code under it"),
        _c("Samples", "samples", "", "samples taken there in that phase"),
        _c("Estimated Time(us)", "est_ns", "us", "phase time x the site's share of the phase's samples"),
        _c("Share of Phase", "share_of_phase", "", "fraction of the phase's samples"),
        _c("Share of Steps", "share_of_steps", "", "fraction of the steps' time (every step of the windows the sampler covered)"),
    ), _call_sites),
    Summary("host_resources", "Host samples taken while the capture was open (mlprof run, or host_sys).", (
        _c("Time(us)", "ts_ns", "us", "wall clock of the sample"),
        _c("Step", "step", "", "step the sample fell in (empty between steps)"),
        _c("CPU(%)", "cpu_percent", "%", "system CPU utilisation, mean of all cores"),
        _c("Job CPU(%)", "job_cpu_percent", "%", "CPU of the job's process tree; 100 = one core busy"),
        _c("Memory Used(bytes)", "mem_used_bytes", "bytes", "system memory in use (total - available)"),
        _c("Memory Available(bytes)", "mem_available_bytes", "bytes", "system memory available"),
        _c("Job RSS(bytes)", "job_rss_bytes", "bytes", "resident memory of the job's process tree"),
        _c("Disk Read(bytes/s)", "disk_read_bytes_per_s", "", "system disk reads since the previous sample"),
        _c("Disk Write(bytes/s)", "disk_write_bytes_per_s", "", "system disk writes since the previous sample"),
        _c("Network Recv(bytes/s)", "net_recv_bytes_per_s", "", "system network received since the previous sample"),
        _c("Network Sent(bytes/s)", "net_sent_bytes_per_s", "", "system network sent since the previous sample"),
    ), host_resources),
    Summary("training_metrics", "Training scalars logged beside the profile (loss, learning rate, throughput).", (
        _c("Step", "step", "", "training step the value belongs to"),
        _c("Name", "name", "", "scalar name, e.g. loss or samples_per_second"),
        _c("Value", "value", "", "the value (empty for NaN or infinity)"),
        _c("Source", "source", "", "user (mlprof.log_scalar), transformers, lightning, or mlprof (measured per step)"),
        _c("Time(us)", "ts_ns", "us", "when it was logged, wall clock"),
    ), scalar_rows),
    Summary("job_steps", "Monitor mode (mlprof run --monitor): every step of the job; empty otherwise.", (
        _c("Step", "step", "", "profiler step number (the first of the row's steps)"),
        _c("Steps", "steps", "", "steps in the row: 1 until the series' cap, then 2, 4, ... (times summed)"),
        _c("Start(us)", "start_ns", "us", "when the step started, wall clock"),
        _c("Wall(us)", "wall_ns", "us", "wall time"),
        _c("CPU(us)", "cpu_ns", "us", "the training thread's own time on a CPU"),
        _c("Wait(us)", "wait_ns", "us", "the training thread's wait for a core (run-queue delay)"),
        _c("Data(us)", "data_ns", "us", "time in DataLoader iteration"),
        _c("GC(us)", "gc_ns", "us", "Python garbage collection pauses"),
        _c("Memory(bytes)", "rss_bytes", "bytes", "the process's RSS (read every 8 steps)"),
        _c("Covered By Window", "covered_by_window", "", "the capture window that recorded the step; empty: none"),
        _c("Warmup", "warmup", "", "the profiler's warm-up step before a window"),
        _c("Trigger", "trigger", "", "why a window opened after this step: baseline, slow_steps, throughput_drop, "
                                     "memory_growth"),
    ), job_step_rows),
)
