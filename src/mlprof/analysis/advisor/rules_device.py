"""Rules about the device and the host feeding it: idle gaps, syncs, communication, allocator."""

from __future__ import annotations

import numpy as np

from mlprof.analysis.advisor.context import AdvisorContext
from mlprof.analysis.intervals import union_length
from mlprof.analysis.advisor.model import Evidence, Finding, Thresholds, severity_for
from mlprof.analysis.steps import IDLE_FIELDS
from mlprof.tables.names import KERNEL_LAUNCH_SQL, SYNC_CALLS

__all__ = ["device_idle", "synchronization", "memory_churn"]

_SYNC_OPS = ("aten::item", "aten::_local_scalar_dense", "aten::nonzero", "aten::is_nonzero",
             "aten::equal", "aten::masked_select", "aten::unique", "aten::_unique2", "aten::repeat_interleave")
_ALLOC_API = ("cudaMalloc", "cudaFree", "cudaMallocHost", "cudaFreeHost", "cudaHostAlloc", "cudaMallocAsync",
              "cudaFreeAsync", "hipMalloc", "hipFree", "hipHostMalloc", "hipHostFree", "hipMallocAsync",
              "hipFreeAsync", "AscendCL@aclrtMalloc", "AscendCL@aclrtFree", "AscendCL@aclrtMallocHost",
              "AscendCL@aclrtFreeHost")


def _in_list(names: tuple[str, ...]) -> str:
    return ", ".join("'" + n + "'" for n in names)


def device_idle(ctx: AdvisorContext, th: Thresholds) -> list[Finding]:
    """Device idle while the host was busy issuing work (launch-bound), with its signs (tiny kernels, many ops).

    Only idle time of cause ``launch`` (docs/attribution.md) is this finding's: idle
    while the host loads data, collects garbage, runs Python or waits in a sync is
    the data_loading, gc_pauses, host_outside_ops or synchronization finding's, so
    the same milliseconds are never reported twice.
    """
    if not ctx.has_device:
        return []
    idle_ns = sum(s.idle_launch_ns or 0 for s in ctx.steps)
    by_cause = {f.removeprefix("idle_").removesuffix("_ns"): sum(getattr(s, f) or 0 for s in ctx.steps)
                for f in IDLE_FIELDS.values()}
    share = ctx.share(idle_ns)
    severity = severity_for(share, th.device_idle_warn_share, th)
    if severity is None:
        return []
    k = ctx.store.dicts(f"""
        SELECT count(*) AS kernels, count(*) FILTER (WHERE dur_ns < {int(th.small_kernel_dur_ns)}) AS tiny_kernels,
               median(dur_ns) AS median_kernel_ns, count(DISTINCT step) AS steps
        FROM device_ops WHERE kind = 'kernel' AND step IS NOT NULL""")[0]
    launches = ctx.store.dicts(f"""
        SELECT count(*) AS launches, sum(dur_ns) AS launch_api_ns, median(dur_ns) AS median_launch_ns
        FROM runtime_calls WHERE step IS NOT NULL AND {KERNEL_LAUNCH_SQL}""")[0]
    gaps = ctx.store.dicts("""
        WITH k AS (SELECT step, device, stream, start_ns, start_ns + dur_ns AS end_ns,
                          lag(start_ns + dur_ns) OVER (PARTITION BY window_index, device, stream ORDER BY start_ns)
                          AS prev_end FROM device_ops WHERE kind IN ('kernel', 'memcpy', 'memset') AND step IS NOT NULL)
        SELECT median(start_ns - prev_end) AS median_gap_ns, quantile_cont(start_ns - prev_end, 0.9) AS p90_gap_ns
        FROM k WHERE prev_end IS NOT NULL AND start_ns >= prev_end""")[0]
    # CANN launches each kernel as Node@launch (alexnet_ddp_910b: 191 for 191 kernels; the finding said
    # "launches 0"). A run whose launch calls are none of these has no count to show, not a count of 0.
    if not launches["launches"]:
        launches = {}
    steps_n = max(k["steps"] or 0, 1)
    tiny_frac = (k["tiny_kernels"] or 0) / k["kernels"] if k["kernels"] else 0.0
    signs = []
    if tiny_frac >= 0.5:
        signs.append(f"{tiny_frac:.0%} of kernels run under {th.small_kernel_dur_ns / 1000:g} us")
    if k["kernels"] and k["kernels"] / steps_n >= 1000:
        signs.append(f"{k['kernels'] / steps_n:.0f} kernels per step")
    return [Finding(
        id="device_idle", severity=severity, share=round(share, 4), impact_ns=int(idle_ns),
        title=f"Launch-bound: the device idles {share:.0%} of step time while the host issues work"
              + (f" ({'; '.join(signs)})" if signs else ""),
        evidence=Evidence(
            metrics={"idle_ns": idle_ns, "total_step_ns": ctx.total_step_ns,
                     **{f"idle_{cause}_ns": ns for cause, ns in by_cause.items()}, **k,
                     "tiny_kernel_fraction": round(tiny_frac, 4), **launches, **gaps},
            steps=ctx.step_rows(lambda s: s.idle_launch_ns or 0)[:5]),
        fix=("The host does not launch work fast enough. Fewer, larger kernels: torch.compile (fusion), "
             "CUDA graphs (torch.compile mode='reduce-overhead'), fused optimizers (foreach/fused=True), "
             "larger batches; remove host work between launches (Python logic, syncs, logging) and start "
             "the next step's data transfer early (pin_memory, non_blocking=True)."),
        rank=ctx.rank)]


def synchronization(ctx: AdvisorContext, th: Thresholds) -> list[Finding]:
    """Host blocked on the device inside steps: .item(), nonzero, cuda*Synchronize."""
    if not ctx.has_device:
        # On a CPU-only run nothing waits for a device: .item() is a plain read.
        return []
    api = ctx.store.dicts(f"""
        SELECT name, count(*) AS count, sum(dur_ns) AS total_ns, max(dur_ns) AS max_ns FROM runtime_calls
        WHERE step IS NOT NULL AND name IN ({_in_list(SYNC_CALLS)}) GROUP BY name ORDER BY total_ns DESC, name""")
    ops = ctx.store.dicts(f"""
        SELECT name, count(*) AS count, sum(dur_ns) AS total_ns, max(dur_ns) AS max_ns FROM host_ops
        WHERE step IS NOT NULL AND name IN ({_in_list(_SYNC_OPS)}) AND NOT coalesce(folded, false)
        GROUP BY name ORDER BY total_ns DESC, name""")
    # An op such as aten::item contains the runtime sync it makes; count the larger of the two views.
    blocked_ns = max(sum(r["total_ns"] for r in api),
                     sum(r["total_ns"] for r in ops if r["name"] in ("aten::_local_scalar_dense", "aten::nonzero")))
    # Waiting while the device runs a collective is communication_overlap's time, not a sync problem.
    waiting_for_comm_ns = min(_blocked_during_communication(ctx, bool(api)), blocked_ns)
    blocked_ns -= waiting_for_comm_ns
    share = ctx.share(blocked_ns)
    severity = severity_for(share, th.sync_warn_share, th)
    if severity is None:
        return []
    sync_filter = f"category = 'cpu_op' AND step IS NOT NULL AND name IN ({_in_list(_SYNC_OPS)})"
    return [Finding(
        id="synchronization", severity=severity, share=round(share, 4), impact_ns=int(blocked_ns),
        title=f"Host waits for the device {share:.0%} of step time in synchronisations",
        evidence=Evidence(metrics={"blocked_ns": blocked_ns, "total_step_ns": ctx.total_step_ns,
                                   "blocked_during_communication_ns": waiting_for_comm_ns},
                          ops=api + ops, call_sites=ctx.call_sites(sync_filter, [])),
        fix=("Keep values on the device inside the step: accumulate losses/metrics as tensors and call "
             ".item()/.cpu() once every N steps; avoid data-dependent shapes (nonzero, masked_select, "
             "unique) in the hot path; remove torch.cuda.synchronize() (use CUDA events for timing)."),
        rank=ctx.rank)]


def _blocked_during_communication(ctx: AdvisorContext, from_api: bool) -> int:
    """ns of host sync time (runtime sync calls, else sync ops) during which the device runs collectives."""
    sync = ("SELECT start_ns, start_ns + dur_ns AS end_ns FROM runtime_calls "
            f"WHERE step IS NOT NULL AND name IN ({_in_list(SYNC_CALLS)})" if from_api else
            "SELECT start_ns, start_ns + dur_ns AS end_ns FROM host_ops WHERE step IS NOT NULL "
            "AND name IN ('aten::_local_scalar_dense', 'aten::nonzero') AND NOT coalesce(folded, false)")
    a = ctx.store.sql(sync).fetchnumpy()
    b = ctx.store.sql("""SELECT start_ns, start_ns + dur_ns AS end_ns FROM device_ops
                         WHERE is_communication AND step IS NOT NULL""").fetchnumpy()
    if not len(a["start_ns"]) or not len(b["start_ns"]):
        return 0
    sa, ea = np.asarray(a["start_ns"], dtype=np.int64), np.asarray(a["end_ns"], dtype=np.int64)
    sb, eb = np.asarray(b["start_ns"], dtype=np.int64), np.asarray(b["end_ns"], dtype=np.int64)
    # |A and B| = |A| + |B| - |A or B|, each a union of intervals.
    return int(union_length(sa, ea) + union_length(sb, eb)
               - union_length(np.concatenate([sa, sb]), np.concatenate([ea, eb])))


def memory_churn(ctx: AdvisorContext, th: Thresholds) -> list[Finding]:
    """Allocator churn: device malloc/free calls inside steps, or very many allocations per step."""
    api = ctx.store.dicts(f"""
        SELECT name, count(*) AS count, sum(dur_ns) AS total_ns, max(dur_ns) AS max_ns FROM runtime_calls
        WHERE step IS NOT NULL AND name IN ({_in_list(_ALLOC_API)}) GROUP BY name ORDER BY total_ns DESC, name""")
    api_ns = sum(r["total_ns"] for r in api)
    share = ctx.share(api_ns)
    allocs = ctx.store.dicts("""
        SELECT count(*) FILTER (WHERE size_bytes > 0) AS allocations, sum(size_bytes) FILTER (WHERE size_bytes > 0)
               AS allocated_bytes, count(DISTINCT step) AS steps FROM memory_events WHERE step IS NOT NULL""")[0]
    per_step = (allocs["allocations"] or 0) / max(allocs["steps"] or 0, 1)
    # torch.cuda.empty_cache() inside the loop is visible as a Python frame (with_stack=True).
    empty_cache = ctx.store.rows("""
        SELECT count(*), coalesce(sum(dur_ns), 0) FROM host_ops
        WHERE step IS NOT NULL AND category = 'python_function' AND name LIKE '%: empty_cache'""")[0]
    severity = severity_for(share, th.memory_api_warn_share, th)
    if severity is None and per_step >= th.allocations_per_step:
        severity = "info"  # many allocations cost time we cannot measure from these events alone
    if empty_cache[0] and severity in (None, "info"):
        # Returning cached blocks forces fresh cudaMalloc calls later, on every such step.
        severity = "warning"
    if severity is None:
        return []
    top_ops = ctx.store.dicts("""
        SELECT h.name, count(*) AS allocations, sum(m.size_bytes) AS allocated_bytes
        FROM memory_events m JOIN host_ops h ON h.op_id = m.host_op_id
        WHERE m.step IS NOT NULL AND m.size_bytes > 0 GROUP BY h.name ORDER BY allocations DESC, h.name LIMIT 5""")
    title = (f"Device allocator calls take {share:.0%} of step time" if api_ns
             else f"{per_step:.0f} allocations per step")
    if empty_cache[0]:
        title += f"; empty_cache() called {empty_cache[0]} time(s) inside steps"
    return [Finding(
        id="memory_churn", severity=severity, share=round(share, 4), impact_ns=int(api_ns), title=title,
        evidence=Evidence(metrics={"allocator_api_ns": api_ns, "allocations_per_step": round(per_step, 1),
                                   "empty_cache_calls": empty_cache[0], "empty_cache_ns": empty_cache[1],
                                   "allocated_bytes": allocs["allocated_bytes"], "total_step_ns": ctx.total_step_ns},
                          ops=api + top_ops),
        fix=("Stop returning memory to the driver inside the loop: remove torch.cuda.empty_cache() calls, "
             "keep shapes stable so cached blocks are reused (pad/bucket variable lengths), set "
             "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True against fragmentation, pre-allocate and reuse "
             "buffers (out= arguments, in-place ops) for ops that allocate on every call."),
        rank=ctx.rank)]
