"""The system sampler's CPU-contention fields (cpu_count, runnable_threads, job_threads, top_processes)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import psutil

from mlprof.collect import sampler as sampler_module
from mlprof.collect.sampler import HostSampler

BUSY = "import time\nend = time.monotonic() + 20\nwhile time.monotonic() < end: pass"


def test_samples_say_who_else_uses_the_cpu(monkeypatch):
    monkeypatch.setattr(sampler_module, "TOP_PROCESSES_COUNT", 10_000)  # a busy shared machine: keep them all
    job = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    other = subprocess.Popen([sys.executable, "-c", BUSY])  # not in the job's tree
    try:
        sampler = HostSampler(job.pid, ("cpu",))
        sampler.sample()  # the first scan only starts every process's CPU count
        time.sleep(sampler_module.TOP_PROCESSES_PERIOD_S + 0.3)
        record = sampler.sample()
    finally:
        other.kill()
        job.kill()
        other.wait()
        job.wait()
    assert record["cpu_count"] == psutil.cpu_count()
    assert record["job_threads"] >= 1
    if os.path.exists("/proc/stat"):
        assert isinstance(record["runnable_threads"], int) and record["runnable_threads"] >= 1
    top = {p["pid"]: p for p in record["top_processes"]}
    assert other.pid in top and top[other.pid]["cpu_percent"] > 0 and top[other.pid]["name"]
    assert job.pid not in top and os.getpid() not in top
    percents = [p["cpu_percent"] for p in record["top_processes"]]
    assert percents == sorted(percents, reverse=True)


def test_top_processes_are_reused_between_scans():
    sampler = HostSampler(os.getpid(), ("cpu",))
    first = sampler.sample()["top_processes"]
    assert sampler.sample()["top_processes"] == first  # within the refresh period: the same list


def test_a_sampler_error_is_one_line_without_traceback(tmp_path, monkeypatch, capsys):
    def broken(self):
        raise RuntimeError("counter went away")

    monkeypatch.setattr(HostSampler, "sample", broken)
    monkeypatch.setattr(sampler_module.signal, "signal", lambda *a: None)  # leave pytest's handlers alone
    code = sampler_module.main([str(tmp_path / "s.jsonl"), "--pid", str(os.getpid()), "--freq-hz", "50"])
    err = capsys.readouterr().err
    assert code == 1 and "counter went away" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
