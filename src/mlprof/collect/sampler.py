"""The system sampler: a small separate process beside the profiled job.

    python -m mlprof.collect.sampler OUT.jsonl --pid PID [--freq-hz 10] [--host-sys cpu,mem,disk,network]

Every 1/freq s it appends one JSON line, a ``HostSample`` of
:mod:`mlprof.capture.records` (docs/capture_format.md): host CPU (system, per core, and the
job's process tree, children included), CPU contention (core count, runnable
threads, the tree's threads, the busiest other processes), memory (system
and the tree's RSS), disk and network I/O rates, and per-GPU utilisation,
memory, power and SM clock through NVML when a driver is present. It runs
until the job's process is gone or it receives SIGTERM. It never imports
torch, and it never prints a traceback into the job's output.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psutil

# The records (msgspec) are imported where a sample is built, not here: the profiler imports this
# module, and `import mlprof` stays free of msgspec.
if TYPE_CHECKING:
    from ..capture.records import GpuSample, HostProcess, HostSample

__all__ = ["HostSampler", "main", "spawn_sampler", "samples_between"]


class _Nvml:
    """GPU counters through NVML; absent quietly when there is no driver."""

    def __init__(self) -> None:
        self.handles: list[Any] = []
        try:
            import pynvml

            pynvml.nvmlInit()
            self.nvml = pynvml
            self.handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
        except Exception:  # noqa: BLE001 - no NVML library or no driver: no GPU samples
            self.handles = []

    def sample(self) -> list[GpuSample]:
        from ..capture.records import GpuSample

        out = []
        for index, handle in enumerate(self.handles):
            n = self.nvml
            try:
                util = n.nvmlDeviceGetUtilizationRates(handle)
                mem = n.nvmlDeviceGetMemoryInfo(handle)
                out.append(GpuSample(
                    index=index,
                    util_percent=util.gpu,
                    mem_util_percent=util.memory,
                    mem_used_bytes=mem.used,
                    power_w=n.nvmlDeviceGetPowerUsage(handle) / 1000.0,
                    sm_clock_mhz=n.nvmlDeviceGetClockInfo(handle, n.NVML_CLOCK_SM),
                ))
            except Exception:  # noqa: BLE001 - one unreadable counter must not end sampling
                continue
        return out


# The busiest processes outside the job are looked up at most this often: a
# scan reads /proc/PID/stat of every process on the host.
TOP_PROCESSES_PERIOD_S = 1.0
TOP_PROCESSES_COUNT = 5


def _process(proc: psutil.Process, cpu_percent: float) -> HostProcess:
    """``proc`` as a record (psutil.Error when it is gone)."""
    from ..capture.records import HostProcess

    # A name that is not UTF-8 (psutil keeps such bytes as lone surrogates) is made valid where every
    # capture file is written (capture.records.encode), as for a frame's file name.
    return HostProcess(pid=proc.pid, name=proc.name(), cpu_percent=round(cpu_percent, 1))


def runnable_threads() -> int | None:
    """Threads runnable right now on the whole host (``procs_running`` of /proc/stat), None where absent."""
    try:
        with open("/proc/stat", "rb") as f:
            for line in f:
                if line.startswith(b"procs_running "):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


class _OtherProcesses:
    """The processes outside the job's tree using the most CPU, refreshed at most once per period."""

    def __init__(self) -> None:
        self._procs: dict[int, psutil.Process] = {}  # kept so cpu_percent(None) measures since the last scan
        self._last_scan = float("-inf")
        self._top: list[HostProcess] = []

    def top(self, exclude: set[int]) -> list[HostProcess]:
        now = time.monotonic()
        if now - self._last_scan < TOP_PROCESSES_PERIOD_S:
            return list(self._top)
        self._last_scan = now
        usage = []
        live: dict[int, psutil.Process] = {}
        for pid in psutil.pids():
            if pid in exclude:
                continue
            proc = self._procs.get(pid)
            try:
                if proc is None:
                    proc = psutil.Process(pid)
                    proc.cpu_percent(None)  # the first call only starts the count
                    live[pid] = proc
                    continue
                live[pid] = proc
                usage.append((proc.cpu_percent(None), proc))
            except psutil.Error:
                continue
        self._procs = live
        usage.sort(key=lambda item: item[0], reverse=True)
        top = []
        for percent, proc in [u for u in usage if u[0] > 0][:TOP_PROCESSES_COUNT]:
            try:
                top.append(_process(proc, percent))
            except psutil.Error:
                continue
        self._top = top
        return list(top)


class HostSampler:
    def __init__(self, pid: int, host_sys: tuple[str, ...]) -> None:
        self.root = psutil.Process(pid)
        self.host_sys = set(host_sys)
        self._procs: dict[int, psutil.Process] = {}
        self._last_t = time.monotonic()
        self._last_disk = psutil.disk_io_counters() if "disk" in self.host_sys else None
        self._last_net = psutil.net_io_counters() if "network" in self.host_sys else None
        self._last_tree_cpu_s = self._tree_cpu_seconds(self._tree())
        psutil.cpu_percent(interval=None, percpu=True)  # primes the per-core counters
        self._cpu_count = psutil.cpu_count() or os.cpu_count() or 1
        self._others = _OtherProcesses()
        self.gpu = _Nvml()

    def _tree(self) -> list[psutil.Process]:
        try:
            procs = [self.root, *self.root.children(recursive=True)]
        except psutil.Error:
            return []
        # Keep the same Process objects so their counters stay continuous.
        live = {}
        for proc in procs:
            live[proc.pid] = self._procs.get(proc.pid, proc)
        self._procs = live
        return list(live.values())

    def _tree_cpu_seconds(self, tree: list[psutil.Process]) -> float:
        total = 0.0
        for proc in tree:
            try:
                times = proc.cpu_times()
                total += times.user + times.system + times.children_user + times.children_system
            except psutil.Error:
                continue
        return total

    def _contention(self, tree: list[psutil.Process], record: HostSample) -> None:
        """Who else wants the CPU: to tell a slow job from a starved one."""
        record.cpu_count = self._cpu_count
        record.runnable_threads = runnable_threads()
        threads = 0
        for proc in tree:
            try:
                threads += proc.num_threads()
            except psutil.Error:
                continue
        if threads == 0:
            # Every process of the job is gone (or a zombie): a sample now would show a job using nothing.
            raise psutil.NoSuchProcess(self.root.pid)
        record.job_threads = threads
        record.job_processes = self._job_processes(tree)
        # The sampler itself is left out too: under `mlprof run` it is not in the job's tree.
        record.top_processes = self._others.top(set(self._procs) | {os.getpid()})

    def _job_processes(self, tree: list[psutil.Process]) -> list[HostProcess]:
        """The job's busiest processes (the training process, DataLoader workers, helpers it started),
        so a training process starved by its own helpers is told apart from one starved by others."""
        usage = []
        for proc in tree:
            try:
                usage.append(_process(proc, proc.cpu_percent(None)))
            except psutil.Error:
                continue
        usage.sort(key=lambda p: -(p.cpu_percent or 0.0))
        return usage[:TOP_PROCESSES_COUNT]

    def sample(self) -> HostSample:
        """One sample; psutil.Error when the job is gone. Groups not asked for stay None (absent on disk)."""
        from ..capture.records import HostSample

        now = time.monotonic()
        elapsed_s = max(now - self._last_t, 1e-6)
        self._last_t = now
        record = HostSample(ts_ns=time.time_ns())
        # One walk of the process table per sample (children() scans every process).
        tree = self._tree() if self.host_sys & {"cpu", "mem"} else []
        if self.host_sys & {"cpu", "mem"} and not tree:
            raise psutil.NoSuchProcess(self.root.pid)  # the job ended between alive() and now
        if "cpu" in self.host_sys:
            per_core = psutil.cpu_percent(interval=None, percpu=True)
            tree_cpu_s = self._tree_cpu_seconds(tree)
            record.cpu_percent = sum(per_core) / max(len(per_core), 1)
            record.cpu_percent_per_core = per_core
            # 100% = one core fully busy, as top shows it.
            record.job_cpu_percent = max(0.0, (tree_cpu_s - self._last_tree_cpu_s) / elapsed_s * 100)
            self._last_tree_cpu_s = tree_cpu_s
            self._contention(tree, record)
        if "mem" in self.host_sys:
            vm = psutil.virtual_memory()
            record.mem_used_bytes = vm.total - vm.available
            record.mem_available_bytes = vm.available
            rss = 0
            for proc in tree:
                try:
                    rss += proc.memory_info().rss
                except psutil.Error:
                    continue
            record.job_rss_bytes = rss
        if self._last_disk is not None:
            disk = psutil.disk_io_counters()
            if disk is not None:
                record.disk_read_bytes_per_s = (disk.read_bytes - self._last_disk.read_bytes) / elapsed_s
                record.disk_write_bytes_per_s = (disk.write_bytes - self._last_disk.write_bytes) / elapsed_s
                self._last_disk = disk
        if self._last_net is not None:
            net = psutil.net_io_counters()
            record.net_recv_bytes_per_s = (net.bytes_recv - self._last_net.bytes_recv) / elapsed_s
            record.net_sent_bytes_per_s = (net.bytes_sent - self._last_net.bytes_sent) / elapsed_s
            self._last_net = net
        record.gpus = self.gpu.sample() or None
        return record

    def alive(self) -> bool:
        try:
            return self.root.is_running() and self.root.status() != psutil.STATUS_ZOMBIE
        except psutil.Error:
            return False


def spawn_sampler(out: Path, pid: int, host_sys: tuple[str, ...], freq_hz: int) -> subprocess.Popen:
    """Start the sampler process watching ``pid`` (it ends by itself when ``pid`` does)."""
    return subprocess.Popen(
        [sys.executable, "-m", "mlprof.collect.sampler", str(out), "--pid", str(pid),
         "--freq-hz", str(freq_hz), "--host-sys", ",".join(host_sys)],
        stdin=subprocess.DEVNULL, start_new_session=True,
    )


def samples_between(samples_file: Path, first_ns: int, last_ns: int) -> list[HostSample]:
    """The samples of a JSON-lines file taken in [first_ns, last_ns], for ``host_samples.json``.

    A line that is not a sample (the torn last line of a killed sampler) is skipped.
    """
    import msgspec

    from ..capture.records import HostSample

    decoder = msgspec.json.Decoder(HostSample)
    samples = []
    with open(samples_file, "rb") as f:
        for line in f:
            try:
                sample = decoder.decode(line)
            except (msgspec.DecodeError, RecursionError):  # ValidationError is a DecodeError
                continue
            if first_ns <= sample.ts_ns <= last_ns:
                samples.append(sample)
    return samples


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="mlprof's system sampler (started by `mlprof run`)")
    parser.add_argument("out")
    parser.add_argument("--pid", type=int, required=True)
    parser.add_argument("--freq-hz", type=int, default=10)
    parser.add_argument("--host-sys", default="cpu,mem")
    args = parser.parse_args(argv)
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(True))
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the job's Ctrl-C is for the job; we stop on SIGTERM
    try:
        sampler = HostSampler(args.pid, tuple(h for h in args.host_sys.split(",") if h))
    except psutil.Error as exc:
        print(f"mlprof sampler: cannot watch pid {args.pid}: {exc}", file=sys.stderr)
        return 1
    try:
        _sample_until_stopped(sampler, args.out, 1.0 / args.freq_hz, stop)
    except Exception as exc:  # noqa: BLE001 - our stderr is the job's: one line, no traceback
        print(f"mlprof sampler: stopped: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    return 0


def _sample_until_stopped(sampler: HostSampler, out_path: str, period_s: float, stop: list[bool]) -> None:
    from ..capture.records import encode

    next_t = time.monotonic() + period_s
    with open(out_path, "ab") as out:
        while not stop and sampler.alive():
            time.sleep(max(0.0, next_t - time.monotonic()))
            next_t += period_s
            try:
                record = sampler.sample()
            except psutil.Error:
                continue  # a process vanished mid-read: skip this sample, not the rest
            out.write(encode(record) + b"\n")
            out.flush()


if __name__ == "__main__":
    sys.exit(main())
