"""The system sampler: a small separate process beside the profiled job.

    python -m mlprof.collect.sampler OUT.jsonl --pid PID [--freq-hz 10] [--host-sys cpu,mem,disk,network]

Every 1/freq s it appends one JSON line: host CPU (system, per core, and the
job's process tree, children included), memory (system and the tree's RSS),
disk and network I/O rates, and per-GPU utilisation, memory, power and SM
clock through NVML when a driver is present. It runs until the job's process
is gone or it receives SIGTERM. It never imports torch.
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil

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

    def sample(self) -> list[dict[str, Any]]:
        out = []
        for index, handle in enumerate(self.handles):
            n = self.nvml
            try:
                util = n.nvmlDeviceGetUtilizationRates(handle)
                mem = n.nvmlDeviceGetMemoryInfo(handle)
                out.append({
                    "index": index,
                    "util_percent": util.gpu,
                    "mem_util_percent": util.memory,
                    "mem_used_bytes": mem.used,
                    "power_w": n.nvmlDeviceGetPowerUsage(handle) / 1000.0,
                    "sm_clock_mhz": n.nvmlDeviceGetClockInfo(handle, n.NVML_CLOCK_SM),
                })
            except Exception:  # noqa: BLE001 - one unreadable counter must not end sampling
                continue
        return out


class HostSampler:
    def __init__(self, pid: int, host_sys: tuple[str, ...]) -> None:
        self.root = psutil.Process(pid)
        self.host_sys = set(host_sys)
        self._procs: dict[int, psutil.Process] = {}
        self._last_t = time.monotonic()
        self._last_disk = psutil.disk_io_counters() if "disk" in self.host_sys else None
        self._last_net = psutil.net_io_counters() if "network" in self.host_sys else None
        self._last_tree_cpu_s = self._tree_cpu_seconds()
        psutil.cpu_percent(interval=None, percpu=True)  # primes the per-core counters
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

    def _tree_cpu_seconds(self) -> float:
        total = 0.0
        for proc in self._tree():
            try:
                times = proc.cpu_times()
                total += times.user + times.system + times.children_user + times.children_system
            except psutil.Error:
                continue
        return total

    def sample(self) -> dict[str, Any]:
        now = time.monotonic()
        elapsed_s = max(now - self._last_t, 1e-6)
        self._last_t = now
        record: dict[str, Any] = {"ts_ns": time.time_ns()}
        if "cpu" in self.host_sys:
            per_core = psutil.cpu_percent(interval=None, percpu=True)
            tree_cpu_s = self._tree_cpu_seconds()
            record["cpu_percent"] = sum(per_core) / max(len(per_core), 1)
            record["cpu_percent_per_core"] = per_core
            # 100% = one core fully busy, as top shows it.
            record["job_cpu_percent"] = max(0.0, (tree_cpu_s - self._last_tree_cpu_s) / elapsed_s * 100)
            self._last_tree_cpu_s = tree_cpu_s
        if "mem" in self.host_sys:
            vm = psutil.virtual_memory()
            record["mem_used_bytes"] = vm.total - vm.available
            record["mem_available_bytes"] = vm.available
            rss = 0
            for proc in self._tree():
                try:
                    rss += proc.memory_info().rss
                except psutil.Error:
                    continue
            record["job_rss_bytes"] = rss
        if self._last_disk is not None:
            disk = psutil.disk_io_counters()
            if disk is not None:
                record["disk_read_bytes_per_s"] = (disk.read_bytes - self._last_disk.read_bytes) / elapsed_s
                record["disk_write_bytes_per_s"] = (disk.write_bytes - self._last_disk.write_bytes) / elapsed_s
                self._last_disk = disk
        if self._last_net is not None:
            net = psutil.net_io_counters()
            record["net_recv_bytes_per_s"] = (net.bytes_recv - self._last_net.bytes_recv) / elapsed_s
            record["net_sent_bytes_per_s"] = (net.bytes_sent - self._last_net.bytes_sent) / elapsed_s
            self._last_net = net
        gpus = self.gpu.sample()
        if gpus:
            record["gpus"] = gpus
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


def samples_between(samples_file: Path, first_ns: int, last_ns: int) -> list[dict[str, Any]]:
    """The samples of a JSON-lines file taken in [first_ns, last_ns]; a torn last line is skipped."""
    samples = []
    with open(samples_file, encoding="utf-8") as f:
        for line in f:
            try:
                sample = json.loads(line)
            except ValueError:
                continue
            if first_ns <= sample.get("ts_ns", 0) <= last_ns:
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
    period_s = 1.0 / args.freq_hz
    next_t = time.monotonic() + period_s
    with open(args.out, "a", encoding="utf-8") as out:
        while not stop and sampler.alive():
            time.sleep(max(0.0, next_t - time.monotonic()))
            next_t += period_s
            out.write(json.dumps(sampler.sample(), separators=(",", ":")) + "\n")
            out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
