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
    assert record.cpu_count == psutil.cpu_count()
    assert record.job_threads >= 1
    if os.path.exists("/proc/stat"):
        assert isinstance(record.runnable_threads, int) and record.runnable_threads >= 1
    top = {p.pid: p for p in record.top_processes}
    assert other.pid in top and top[other.pid].cpu_percent > 0 and top[other.pid].name
    assert job.pid not in top and os.getpid() not in top
    percents = [p.cpu_percent for p in record.top_processes]
    assert percents == sorted(percents, reverse=True)


def test_top_processes_are_reused_between_scans():
    sampler = HostSampler(os.getpid(), ("cpu",))
    first = sampler.sample().top_processes
    assert sampler.sample().top_processes == first  # within the refresh period: the same list


def test_a_sampler_error_is_one_line_without_traceback(tmp_path, monkeypatch, capsys):
    def broken(self):
        raise RuntimeError("counter went away")

    monkeypatch.setattr(HostSampler, "sample", broken)
    monkeypatch.setattr(sampler_module.signal, "signal", lambda *a: None)  # leave pytest's handlers alone
    code = sampler_module.main([str(tmp_path / "s.jsonl"), "--pid", str(os.getpid()), "--freq-hz", "50"])
    err = capsys.readouterr().err
    assert code == 1 and "counter went away" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_what_the_sampler_writes_the_parser_reads(tmp_path, monkeypatch):
    from mlprof.capture.files import write_json_atomic
    from mlprof.parse.host_samples import read_host_counters

    monkeypatch.setattr(sampler_module.signal, "signal", lambda *a: None)
    lines = tmp_path / "host_samples.jsonl"
    job = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1.5)"])
    try:
        assert sampler_module.main([str(lines), "--pid", str(job.pid), "--freq-hz", "20",
                                    "--host-sys", "cpu,mem,disk,network"]) == 0  # returns when the job ends
    finally:
        job.wait()
    with open(lines, "ab") as f:
        f.write(b'{"ts_ns": 12, "cpu_perc')  # torn, as a kill leaves it
    samples = sampler_module.samples_between(lines, 0, 2**63)
    assert len(samples) >= 3 and samples[0].job_rss_bytes > 0 and samples[0].job_threads >= 1
    write_json_atomic(tmp_path / "host_samples.json", samples)
    rows = read_host_counters(tmp_path, job.pid)
    series = set(zip(rows["name"], rows["series"]))
    assert {("host_cpu", "system_percent"), ("host_cpu", "job_percent"), ("host_cpu", "cpu_count"),
            ("host_memory", "job_rss_bytes"), ("host_network", "recv_bytes_per_s")} <= series
    assert len(set(rows["ts_ns"])) == len(samples)
    assert sampler_module.samples_between(lines, samples[1].ts_ns, samples[1].ts_ns) == [samples[1]]


def test_a_process_name_that_is_not_utf8_is_written_as_valid_json():
    import msgspec

    from mlprof.capture.records import HostProcess, encode

    class Proc:
        pid = 5

        def name(self):
            return "bad\udcffname"  # how psutil keeps bytes that are not UTF-8

    record = sampler_module._process(Proc(), 12.34)
    # Written as valid UTF-8, the undecodable byte as U+FFFD (capture.records.encode, for every file).
    assert msgspec.json.decode(encode(record), type=HostProcess) == HostProcess(pid=5, name="bad\ufffdname",
                                                                              cpu_percent=12.3)
