"""cpu_contention on hand-built captures: reported only when the job gets less CPU than it can use."""

from __future__ import annotations

import json

from mlprof.analysis.advisor import advise
from mlprof.parse import ParseOptions, parse_path
from mlprof.tables.store import TableStore

T0 = 1_700_000_000_000_000_000
MS = 1_000_000


def _capture(tmp_path, job_percent, system_percent, runnable, threads=2):
    root = tmp_path / "cap"
    window = root / "raw" / "window_0000"
    window.mkdir(parents=True)
    steps = [{"step": i, "start_ns": T0 + i * 50 * MS, "end_ns": T0 + (i + 1) * 50 * MS} for i in range(4)]
    (window / "steps.json").write_text(json.dumps(steps))
    (window / "window.json").write_text(json.dumps({"index": 0, "status": "complete", "files": {"steps": "steps.json"}}))
    (root / "profiler_info.json").write_text(json.dumps({
        "schema_version": 1, "kind": "mlprof.capture", "status": "finished", "rank": 0, "world_size": 1,
        "windows": [{"index": 0, "dir": "raw/window_0000", "status": "complete"}], "created_wall_ns": T0}))
    (root / "profiler_metadata.json").write_text(json.dumps(
        {"user": {}, "environment": {}, "system": {"cpu_count": 2, "torch_num_threads": threads}}))
    samples = [{"ts_ns": T0 + k * 25 * MS, "cpu_percent": system_percent, "job_cpu_percent": job_percent,
                "cpu_count": 2, "runnable_threads": runnable, "job_threads": 4,
                "top_processes": [{"pid": 99, "name": "stress", "cpu_percent": 150.0}]} for k in range(10)]
    (root / "host_samples.json").write_text(json.dumps(samples))
    return TableStore(parse_path(root, ParseOptions())[0].tables_dir)


def test_a_starved_job_is_told_who_takes_its_cores(tmp_path):
    report = advise(_capture(tmp_path, job_percent=60.0, system_percent=100.0, runnable=5))
    (finding,) = [f for f in report.findings if f.id == "cpu_contention"]
    assert finding.severity in ("warning", "critical") and "stress (pid 99" in finding.title
    assert finding.share == 0.7  # got 60% of the 200% its two threads could use


def test_a_busy_machine_that_still_gives_the_job_its_cores_is_silent(tmp_path):
    # One torch thread getting 90% of a core: other processes are busy, but the job is not slowed.
    report = advise(_capture(tmp_path, job_percent=90.0, system_percent=100.0, runnable=6, threads=1))
    assert not [f for f in report.findings if f.id == "cpu_contention"]


def test_idle_cores_are_silent(tmp_path):
    report = advise(_capture(tmp_path, job_percent=60.0, system_percent=40.0, runnable=1))
    assert not [f for f in report.findings if f.id == "cpu_contention"]
