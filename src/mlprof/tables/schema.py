"""The parsed tables: every column of every table, declared once.

Exporters, analyses, the SQLite writer and docs/output_files.md all read these
declarations; nothing else spells a table's columns. Times are integer
nanoseconds of the wall clock (``*_ns``), sizes are bytes (``*_bytes``).
``window_index`` is the capture window the row came from (0 for a bare trace file).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Column", "TableSchema", "TABLES", "ID_SPACES", "table"]


@dataclass(frozen=True)
class Column:
    name: str
    sql_type: str  # DuckDB type: BIGINT, INTEGER, DOUBLE, VARCHAR, BOOLEAN
    doc: str
    # Row ids numbered per table ("op": host_ops, "call": runtime_calls,
    # "device": device_ops): shifted when windows parsed apart are combined.
    id_space: str | None = None


# Which table's rows each id space numbers.
ID_SPACES = {"op": "host_ops", "call": "runtime_calls", "device": "device_ops", "stack": "python_stacks",
             "module_call": "module_calls"}


@dataclass(frozen=True)
class TableSchema:
    name: str
    doc: str
    columns: tuple[Column, ...]

    @property
    def column_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    def create_sql(self, relation: str | None = None) -> str:
        cols = ", ".join(f'"{c.name}" {c.sql_type}' for c in self.columns)
        return f'CREATE TABLE "{relation or self.name}" ({cols})'


def _t(name: str, doc: str, *cols: tuple) -> TableSchema:
    return TableSchema(name, doc, tuple(Column(*c) for c in cols))


_WINDOW = ("window_index", "INTEGER", "capture window index (0 for a bare trace file)")
_STEP = ("step", "BIGINT", "profiler step number (ProfilerStep#N) the row falls in; NULL outside every step")

TABLES: dict[str, TableSchema] = {
    t.name: t
    for t in (
        _t(
            "host_ops",
            "Framework ops and annotations on host threads (Kineto cpu_op, user_annotation, python_function).",
            _WINDOW,
            ("op_id", "BIGINT", "row id, unique in the table", "op"),
            ("name", "VARCHAR", "op name, e.g. aten::addmm or a record_function label"),
            ("category", "VARCHAR", "Kineto category: cpu_op, user_annotation, python_function, ..."),
            ("pid", "BIGINT", "process id"),
            ("tid", "BIGINT", "thread id"),
            ("start_ns", "BIGINT", "start, wall clock ns"),
            ("dur_ns", "BIGINT", "duration, ns (total time, children included)"),
            ("self_ns", "BIGINT", "duration minus the time of directly nested ops and runtime calls, ns"),
            ("folded", "BOOLEAN",
             "nested call with its parent's name and no sibling op; torch's key_averages() folds it into the parent"),
            ("folded_self_ns", "BIGINT", "self time with folded children merged in (what key_averages() reports), ns"),
            ("depth", "INTEGER", "nesting depth on its thread, 0 = outermost (NULL for python_function)"),
            ("parent_op_id", "BIGINT", "op_id of the innermost enclosing op on the same thread", "op"),
            _STEP,
            ("external_id", "BIGINT", "Kineto External id (links runtime calls and device ops)"),
            ("sequence_number", "BIGINT", "autograd sequence number (forward/backward link)"),
            ("fwd_thread_id", "BIGINT", "thread of the forward op, set on backward ops"),
            ("input_dims", "VARCHAR", "input shapes as JSON text, when record_shapes was on"),
            ("input_types", "VARCHAR", "input dtypes as JSON text, when record_shapes was on"),
        ),
        _t(
            "runtime_calls",
            "Device runtime/driver API calls on host threads (cudaLaunchKernel, cudaMemcpyAsync, hipLaunchKernel, ...).",
            _WINDOW,
            ("call_id", "BIGINT", "row id", "call"),
            ("name", "VARCHAR", "API name"),
            ("category", "VARCHAR", "Kineto category: cuda_runtime or cuda_driver"),
            ("pid", "BIGINT", "process id"),
            ("tid", "BIGINT", "thread id"),
            ("start_ns", "BIGINT", "start, wall clock ns"),
            ("dur_ns", "BIGINT", "duration, ns"),
            ("correlation", "BIGINT", "correlation id shared with the device op it launched"),
            ("external_id", "BIGINT", "Kineto External id"),
            ("host_op_id", "BIGINT", "op_id of the innermost host op that made the call", "op"),
            _STEP,
        ),
        _t(
            "device_ops",
            "Work executed on a device: kernels, memcpy, memset, synchronisations.",
            _WINDOW,
            ("device_op_id", "BIGINT", "row id", "device"),
            ("name", "VARCHAR", "kernel or copy name"),
            ("kind", "VARCHAR", "kernel, memcpy, memset or sync"),
            ("device", "INTEGER", "device index"),
            ("stream", "BIGINT", "stream id"),
            ("start_ns", "BIGINT", "start, wall clock ns"),
            ("dur_ns", "BIGINT", "duration, ns"),
            ("correlation", "BIGINT", "correlation id of the launching runtime call"),
            ("external_id", "BIGINT", "Kineto External id"),
            ("host_op_id", "BIGINT", "op_id of the host op whose runtime call launched it", "op"),
            _STEP,
            ("grid", "VARCHAR", "launch grid [x, y, z]"),
            ("block", "VARCHAR", "thread block [x, y, z]"),
            ("size_bytes", "BIGINT", "bytes copied or set (memcpy, memset)"),
            ("registers_per_thread", "BIGINT", "registers per thread (kernels)"),
            ("shared_memory_bytes", "BIGINT", "shared memory per block, bytes (kernels)"),
            ("occupancy_pct", "DOUBLE", "estimated achieved occupancy, percent (kernels)"),
            ("is_communication", "BOOLEAN", "a collective/point-to-point communication kernel (NCCL/RCCL)"),
        ),
        _t(
            "collectives",
            "Communication kernels with the collective metadata Kineto records.",
            _WINDOW,
            ("device_op_id", "BIGINT", "the kernel's row in device_ops", "device"),
            ("name", "VARCHAR", "kernel name"),
            ("collective_name", "VARCHAR", "allreduce, broadcast, allgather, ... (from the kernel name when absent)"),
            ("group_name", "VARCHAR", "process group name"),
            ("group_desc", "VARCHAR", "process group description"),
            ("group_ranks", "VARCHAR", "ranks of the process group, JSON text"),
            ("group_size", "BIGINT", "number of ranks in the group"),
            ("dtype", "VARCHAR", "element type"),
            ("in_nelems", "BIGINT", "input message elements"),
            ("out_nelems", "BIGINT", "output message elements"),
            ("size_bytes", "BIGINT", "input message size, bytes (elements x dtype size; NULL when unknown)"),
            ("in_split_size", "VARCHAR", "input split sizes (all-to-all), JSON text"),
            ("out_split_size", "VARCHAR", "output split sizes, JSON text"),
            ("device", "INTEGER", "device index"),
            ("stream", "BIGINT", "stream id"),
            ("start_ns", "BIGINT", "start, wall clock ns"),
            ("dur_ns", "BIGINT", "duration, ns"),
            _STEP,
        ),
        _t(
            "flows",
            "Flow arrows of the trace (s/f pairs): ac2g host->device launches, fwdbwd forward->backward.",
            _WINDOW,
            ("flow_id", "BIGINT", "the trace's flow id"),
            ("category", "VARCHAR", "flow category (ac2g, fwdbwd, ...)"),
            ("start_pid", "BIGINT", "pid of the flow start"),
            ("start_tid", "BIGINT", "tid of the flow start"),
            ("start_ns", "BIGINT", "time of the flow start, ns"),
            ("end_pid", "BIGINT", "pid of the flow end"),
            ("end_tid", "BIGINT", "tid of the flow end"),
            ("end_ns", "BIGINT", "time of the flow end, ns"),
        ),
        _t(
            "steps",
            "Training steps: ProfilerStep#N spans from the trace, else mlprof's steps.json; a step the "
            "profiler's stop cut (marked partial by mlprof, or a last step a tenth of the others) is left out.",
            _WINDOW,
            ("step", "BIGINT", "step number"),
            ("start_ns", "BIGINT", "start, wall clock ns"),
            ("end_ns", "BIGINT", "end, wall clock ns"),
            ("dur_ns", "BIGINT", "end_ns - start_ns"),
            ("source", "VARCHAR", "kineto (ProfilerStep events) or mlprof (steps.json)"),
            ("cpu_ns", "BIGINT", "CPU time of the whole process during the step, ns (NULL: not measured)"),
            ("cpu_wait_ns", "BIGINT",
             "time the stepping thread waited for a CPU core (run-queue delay), ns (NULL: not measured)"),
            ("thread_cpu_ns", "BIGINT",
             "the stepping thread's own time on a CPU during the step, ns (NULL: not measured)"),
            ("speed_probe_ns", "BIGINT",
             "CPU time of mlprof's fixed host-speed probe, run right after the step, ns (NULL: not run)"),
        ),
        _t(
            "markers",
            "mstx marks and ranges, device-side annotations and trace instant events.",
            _WINDOW,
            ("name", "VARCHAR", "marker text"),
            ("kind", "VARCHAR", "mark, range, device_annotation or instant"),
            ("start_ns", "BIGINT", "start (or the instant), ns"),
            ("end_ns", "BIGINT", "end, ns (NULL for a mark or an unclosed range)"),
            ("pid", "BIGINT", "process id (or device for device_annotation)"),
            ("tid", "BIGINT", "thread id (or stream)"),
            ("range_id", "BIGINT", "mstx range id"),
            ("device_start_ns", "BIGINT", "device-side start of a range recorded on a stream, ns"),
            ("device_end_ns", "BIGINT", "device-side end, ns"),
        ),
        _t(
            "gc_pauses",
            "Python garbage-collector pauses recorded by mlprof (gc.json).",
            _WINDOW,
            ("start_ns", "BIGINT", "start, ns"),
            ("dur_ns", "BIGINT", "pause, ns"),
            ("generation", "INTEGER", "GC generation"),
            ("collected", "BIGINT", "objects collected"),
            ("uncollectable", "BIGINT", "objects found uncollectable"),
            ("tid", "BIGINT", "thread id"),
            _STEP,
        ),
        _t(
            "memory_events",
            "Allocator events ([memory] instants of profile_memory=True): one row per allocation (+) or free (-).",
            _WINDOW,
            ("ts_ns", "BIGINT", "time, ns"),
            ("pid", "BIGINT", "process id"),
            ("tid", "BIGINT", "thread id"),
            ("device_type", "INTEGER", "Kineto device type (0 = CPU, 1 = CUDA, ...)"),
            ("device_id", "INTEGER", "device index (-1 for CPU)"),
            ("addr", "BIGINT", "block address"),
            ("size_bytes", "BIGINT", "bytes allocated (>0) or freed (<0)"),
            ("total_allocated_bytes", "BIGINT", "allocator total after the event, bytes"),
            ("total_reserved_bytes", "BIGINT", "allocator reserved total after the event, bytes"),
            ("host_op_id", "BIGINT", "innermost host op running on the thread at that time", "op"),
            _STEP,
        ),
        _t(
            "counters",
            "Counter samples (Chrome 'C' events; host/device samplers).",
            _WINDOW,
            ("name", "VARCHAR", "counter name"),
            ("series", "VARCHAR", "series inside the counter (the args key)"),
            ("pid", "BIGINT", "process id"),
            ("ts_ns", "BIGINT", "time, ns"),
            ("value", "DOUBLE", "sampled value"),
        ),
        _t(
            "threads",
            "Process and thread names and sort order from the trace's metadata events.",
            _WINDOW,
            ("pid", "BIGINT", "process id (or device)"),
            ("tid", "BIGINT", "thread id (or stream); NULL for process-level rows"),
            ("kind", "VARCHAR", "process_name, thread_name, process_labels, process_sort_index, thread_sort_index"),
            ("value", "VARCHAR", "the name, label or index"),
        ),
        _t(
            "metadata",
            "Trace and capture metadata: one JSON value per key (deviceProperties, distributedInfo, rank, ...).",
            _WINDOW,
            ("key", "VARCHAR", "metadata key"),
            ("value_json", "VARCHAR", "the value as JSON text"),
        ),
        _t(
            "module_calls",
            "nn.Module forward calls recorded by mlprof's global module hooks (modules.json).",
            _WINDOW,
            ("call_id", "BIGINT", "row id", "module_call"),
            ("module_path", "VARCHAR", "module name under the outermost called module, e.g. Net.layers.0"),
            ("module_type", "VARCHAR", "class name, e.g. Linear"),
            ("module_class_module", "VARCHAR",
             "Python module defining the class, e.g. torch.nn.modules.linear (NULL in older captures)"),
            ("param_dtype", "VARCHAR", "dtype of the module's first own parameter, e.g. torch.float32"),
            ("input_dtype", "VARCHAR", "dtype of the first floating-point tensor argument of its first call"),
            ("input_shape", "VARCHAR", "outermost calls only: the first tensor argument's shape, JSON list"),
            ("tid", "BIGINT", "thread id"),
            ("start_ns", "BIGINT", "forward call start, ns"),
            ("end_ns", "BIGINT", "forward call end, ns (NULL when it raised or was still running)"),
            ("dur_ns", "BIGINT", "end_ns - start_ns (NULL when the end is unknown)"),
            ("depth", "INTEGER", "nesting depth among module calls of the thread, 0 = outermost"),
            ("parent_call_id", "BIGINT", "call_id of the enclosing module call", "module_call"),
            _STEP,
        ),
        _t(
            "python_stacks",
            "Python stacks seen by the sampler (python_samples.json), each stored once.",
            _WINDOW,
            ("stack_id", "BIGINT", "row id", "stack"),
            ("call_site", "VARCHAR", "innermost frame of the user's code: 'file:line function' (library frames folded)"),
            ("call_site_file", "VARCHAR", "file of call_site"),
            ("call_site_line", "BIGINT", "line of call_site"),
            ("call_site_function", "VARCHAR", "function of call_site"),
            ("leaf", "VARCHAR", "innermost frame of any code: 'file:line function'"),
            ("user_frames", "VARCHAR", "the user's frames only (library frames folded), outermost first, JSON list"),
            ("frames", "VARCHAR", "every frame, outermost first, as a JSON list of 'file:line function' (a comprehension's frame is its enclosing function at the comprehension's line, as Python 3.12+ reports it)"),
        ),
        _t(
            "python_samples",
            "Samples of the training thread's Python stack, one every sampling interval.",
            _WINDOW,
            ("ts_ns", "BIGINT", "sample time, ns"),
            ("tid", "BIGINT", "thread id of the sampled thread"),
            ("stack_id", "BIGINT", "the stack in python_stacks", "stack"),
            ("weight_ns", "BIGINT", "the sampling interval: the time one sample stands for, ns"),
            _STEP,
        ),
        _t(
            "phase_spans",
            "Attribution: each step partitioned into phases, once on the host thread and once on the devices "
            "(docs/attribution.md). The spans of a step and view sum exactly to the step.",
            _WINDOW,
            _STEP,
            ("view", "VARCHAR", "host (the step's thread) or device (all device work)"),
            ("phase", "VARCHAR", "host: data_loading, forward, backward, optimizer, communication, gc, python, "
                                 "other; device: compute, communication, memcpy, memset, idle"),
            ("cause", "VARCHAR", "for device idle: what the host was doing (data_loading, synchronization, "
                                 "python, gc, launch, communication); else NULL"),
            ("start_ns", "BIGINT", "span start, ns"),
            ("end_ns", "BIGINT", "span end, ns"),
            ("dur_ns", "BIGINT", "end_ns - start_ns"),
            ("tid", "BIGINT", "host view: the step's thread"),
            ("overlapped", "BOOLEAN", "device compute while communication also ran (communication hidden)"),
        ),
        _t(
            "backward_links",
            "Backward charged to its forward cause: each host op run inside an autograd node (the node itself "
            "included), linked by autograd sequence number to the forward op that created the node "
            "(docs/attribution.md). Ops outside every node have no row.",
            _WINDOW,
            ("op_id", "BIGINT", "the backward host op (the node or an op inside it)", "op"),
            ("node_op_id", "BIGINT", "the innermost autograd::engine::evaluate_function node around it", "op"),
            ("forward_op_id", "BIGINT", "the forward op that created the node; NULL when not in the capture",
             "op"),
            ("forward_tid", "BIGINT", "thread of the forward op"),
            ("forward_start_ns", "BIGINT", "start of the forward op, ns"),
        ),
        _t(
            "scalars",
            "Training scalars logged beside the profile (mlprof.log_scalar, the trainer integrations), for the whole "
            "profiling session: one row per value.",
            ("window_index", "INTEGER", "always NULL: scalars belong to the capture, not to one window"),
            ("step", "BIGINT", "training step the value belongs to (the trainer's global step, else the profiler "
                               "step when it was logged); NULL when unknown"),
            ("name", "VARCHAR", "scalar name, e.g. loss, learning_rate, grad_norm, samples_per_second"),
            ("value", "DOUBLE", "the value; NULL for NaN or infinity"),
            ("ts_ns", "BIGINT", "when it was logged, wall clock ns"),
            ("source", "VARCHAR", "who logged it: user (mlprof.log_scalar), transformers or lightning (the trainer's "
                                  "own logs), mlprof (throughput an integration measured per step)"),
        ),
        _t(
            "job_steps",
            "Monitor mode (mlprof run --monitor): every step of the job, from the capture's job_steps.bin. Past "
            "the series' cap a row holds several consecutive steps (steps > 1), its times summed "
            "(docs/monitor.md).",
            ("window_index", "INTEGER", "always NULL: the series belongs to the capture, not to one window"),
            ("step", "BIGINT", "profiler step number (the first of the row's steps)"),
            ("steps", "BIGINT", "steps in the row: 1 until the series reached its cap, then 2, 4, ..."),
            ("start_ns", "BIGINT", "start of the (first) step, wall clock ns"),
            ("wall_ns", "BIGINT", "wall time of the step(s), ns"),
            ("cpu_ns", "BIGINT", "the stepping thread's own time on a CPU (schedstat), ns; NULL: not measured"),
            ("wait_ns", "BIGINT", "the stepping thread's wait for a core (run-queue delay), ns; NULL: not measured"),
            ("data_ns", "BIGINT", "time in DataLoader iteration (waiting for a batch), ns"),
            ("gc_ns", "BIGINT", "Python garbage collection pauses, ns"),
            ("rss_bytes", "BIGINT", "the process's resident memory, read every 8 steps; NULL: not measured"),
            ("covered_by_window", "INTEGER", "the capture window that recorded the step; NULL: none"),
            ("warmup", "BOOLEAN", "the profiler's warm-up step before a window (traced, not kept)"),
            ("trigger", "VARCHAR", "the reason a window was opened after this step (baseline, slow_steps, "
                                   "throughput_drop, memory_growth); NULL: none"),
        ),
        _t(
            "monitor_windows",
            "Monitor mode: the windows it opened (and the triggers it had no window left for), from job_monitor.json.",
            ("window_index", "INTEGER", "always NULL: the list belongs to the capture"),
            ("window", "INTEGER", "the capture window it opened (window_index elsewhere); NULL when skipped"),
            ("reason", "VARCHAR", "baseline, slow_steps, throughput_drop or memory_growth"),
            ("detail", "VARCHAR", "what the trigger saw, in words"),
            ("trigger_step", "BIGINT", "the step after which the window opened"),
            ("first_step", "BIGINT", "first recorded step"),
            ("last_step", "BIGINT", "last recorded step"),
            ("skipped", "VARCHAR", "why no window was opened (limit on windows or disk); NULL: opened"),
        ),
        _t(
            "unknown_events",
            "Events the parser does not model, counted per phase and category (never fatal).",
            _WINDOW,
            ("ph", "VARCHAR", "Chrome trace phase"),
            ("category", "VARCHAR", "category"),
            ("count", "BIGINT", "number of events"),
        ),
    )
}


def table(name: str) -> TableSchema:
    return TABLES[name]


# Host samples in the ``counters`` table (docs/capture_format.md's host_samples.json):
# sample key -> (counter name, series). Written by the parser, read by analyses.
HOST_COUNTERS = {
    "cpu_percent": ("host_cpu", "system_percent"),
    "job_cpu_percent": ("host_cpu", "job_percent"),
    "mem_used_bytes": ("host_memory", "used_bytes"),
    "mem_available_bytes": ("host_memory", "available_bytes"),
    "job_rss_bytes": ("host_memory", "job_rss_bytes"),
    "disk_read_bytes_per_s": ("host_disk", "read_bytes_per_s"),
    "disk_write_bytes_per_s": ("host_disk", "write_bytes_per_s"),
    "net_recv_bytes_per_s": ("host_network", "recv_bytes_per_s"),
    "net_sent_bytes_per_s": ("host_network", "sent_bytes_per_s"),
    "cpu_count": ("host_cpu", "cpu_count"),
    "runnable_threads": ("host_cpu", "runnable_threads"),
    "job_threads": ("host_cpu", "job_threads"),
}
# The busiest processes outside the job (host_samples.json ``top_processes``):
# counter rows named this, series = process name, pid = its pid, value = CPU % of one core.
HOST_TOP_PROCESSES_COUNTER = "host_top_processes"
# The job's own busiest processes (``job_processes``: the training process, its workers and helpers), same layout.
HOST_JOB_PROCESSES_COUNTER = "host_job_processes"


# Ascend NPU tables (torch_npu imports, docs/ascend.md): what an NPU task has
# beyond the device_ops columns. Empty for Kineto traces.
TABLES.update({t.name: t for t in (
    _t(
        "device_op_details",
        "Ascend attributes of a device op (kernel_details.csv / the db's TASK and COMPUTE_TASK_INFO).",
        _WINDOW,
        ("device_op_id", "BIGINT", "the op's row in device_ops", "device"),
        ("task_type", "VARCHAR", "Ascend task type: AI_CORE, AI_CPU, MIX_AIV, HCCL, PCIE_DMA_SQE, ..."),
        ("accelerator_core", "VARCHAR", "unit that ran it (kernel_details Accelerator Core): AI_CORE, "
                                        "AI_VECTOR_CORE, AI_CPU, MIX_AIC, MIX_AIV, HCCL, DSA_SQE, ..."),
        ("op_type", "VARCHAR", "operator type (kernel_details Type, e.g. Conv2D, TransData)"),
        ("op_state", "VARCHAR", "dynamic or static shape (kernel_details OP State)"),
        ("task_id", "BIGINT", "device task id"),
        ("context_id", "BIGINT", "context id of a sub-task (mix/FFTS ops)"),
        ("block_dim", "BIGINT", "cores the task ran on (Block Dim)"),
        ("mix_block_dim", "BIGINT", "cores of the second kind for mix ops (Mix Block Dim)"),
        ("wait_ns", "BIGINT", "device idle before the task on its stream (Wait Time), ns"),
        ("input_shapes", "VARCHAR", "input shapes as written by the tool"),
        ("input_dtypes", "VARCHAR", "input data types"),
        ("input_formats", "VARCHAR", "input memory formats (NCHW, NC1HWC0, FRACTAL_Z, ...)"),
        ("output_shapes", "VARCHAR", "output shapes"),
        ("output_dtypes", "VARCHAR", "output data types"),
        ("output_formats", "VARCHAR", "output memory formats"),
        ("source", "VARCHAR", "file or db table the row came from"),
    ),
    _t(
        "device_op_metrics",
        "Per-task hardware counters of an NPU op (the PMU columns of kernel_details.csv / TASK_PMU_INFO), long format.",
        _WINDOW,
        ("device_op_id", "BIGINT", "the op's row in device_ops", "device"),
        ("metric", "VARCHAR", "counter name as the tool writes it, e.g. aic_mac_ratio, aiv_time(us)"),
        ("value", "DOUBLE", "counter value, in the unit its name says"),
    ),
)})
