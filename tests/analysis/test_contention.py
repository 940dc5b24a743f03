"""cpu_contention on hand-built captures: reported only when the job gets less CPU than it can use."""

from __future__ import annotations

import json

from mlprof.analysis.advisor import advise
from mlprof.parse import ParseOptions, parse_path
from mlprof.tables.store import TableStore

from trace_events import BASE_NS

T0 = BASE_NS
MS = 1_000_000


def _capture(tmp_path, job_percent, system_percent, runnable, threads=2, job_processes=None, pid=None,
             collective_ms_per_step=0, wait_ms_per_step=None):
    root = tmp_path / "cap"
    window = root / "raw" / "window_0000"
    window.mkdir(parents=True)
    steps = [{"step": i, "start_ns": T0 + i * 50 * MS, "end_ns": T0 + (i + 1) * 50 * MS,
              **({"cpu_wait_ns": wait_ms_per_step * MS} if wait_ms_per_step is not None else {})} for i in range(4)]
    (window / "steps.json").write_text(json.dumps(steps))
    files = {"steps": "steps.json"}
    if collective_ms_per_step:  # the step's thread waits in a gloo all-reduce at the end of each step
        events = [{"ph": "X", "cat": "cpu_op", "name": "gloo:all_reduce", "pid": 1, "tid": 1,
                   "ts": (T0 + (i + 1) * 50 * MS - collective_ms_per_step * MS) / 1000,
                   "dur": collective_ms_per_step * 1000} for i in range(4)]
        (window / "kineto.pt.trace.json").write_text(json.dumps({"traceEvents": events}))
        files["kineto"] = "kineto.pt.trace.json"
    (window / "window.json").write_text(json.dumps({"index": 0, "status": "complete", "files": files}))
    (root / "profiler_info.json").write_text(json.dumps({
        "schema_version": 1, "kind": "mlprof.capture", "status": "finished", "rank": 0, "world_size": 1,
        **({"pid": pid} if pid else {}),
        "windows": [{"index": 0, "dir": "raw/window_0000", "status": "complete"}], "created_wall_ns": T0}))
    (root / "profiler_metadata.json").write_text(json.dumps(
        {"user": {}, "environment": {}, "system": {"cpu_count": 2, "torch_num_threads": threads}}))
    samples = [{"ts_ns": T0 + k * 25 * MS, "cpu_percent": system_percent, "job_cpu_percent": job_percent,
                "cpu_count": 2, "runnable_threads": runnable, "job_threads": 4,
                "top_processes": [{"pid": 99, "name": "stress", "cpu_percent": 150.0}] if job_processes is None else [],
                **({"job_processes": job_processes} if job_processes else {})} for k in range(10)]
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


def test_helpers_the_job_started_that_starve_its_training_process_are_named(tmp_path):
    # The job's tree uses 190% of a core, but 130% of it is two shell loops it started: the training
    # process (pid 4242) gets 60% of the 200% its two threads could use.
    procs = [{"pid": 4242, "name": "python", "cpu_percent": 60.0}, {"pid": 5001, "name": "sh", "cpu_percent": 65.0},
             {"pid": 5002, "name": "sh", "cpu_percent": 65.0}]
    report = advise(_capture(tmp_path, job_percent=190.0, system_percent=100.0, runnable=5, job_processes=procs,
                             pid=4242))
    (finding,) = [f for f in report.findings if f.id == "cpu_contention"]
    assert finding.share == 0.7 and finding.evidence.metrics["training_process_cpu_percent"] == 60.0
    assert "the job's own other processes used 1.3" in finding.title and "sh (pid 5001" in finding.title
    assert "DataLoader workers" in finding.fix
    # The same tree where the training process itself gets its two cores' worth: silent.
    busy = [{"pid": 4242, "name": "python", "cpu_percent": 170.0}, {"pid": 5001, "name": "sh", "cpu_percent": 20.0}]
    quiet = advise(_capture(tmp_path / "b", job_percent=190.0, system_percent=100.0, runnable=5,
                            job_processes=busy, pid=4242))
    assert not [f for f in quiet.findings if f.id == "cpu_contention"]


def test_a_rank_waiting_in_collectives_for_a_slower_rank_is_not_starved(tmp_path):
    # 60% of a core of the 100% its one thread could use, while it waits 30 of every 50 ms in an all-reduce
    # for the other rank (which takes the other core): it had all the CPU it could use.
    waiting = advise(_capture(tmp_path, job_percent=60.0, system_percent=100.0, runnable=5, threads=1,
                              collective_ms_per_step=30))
    assert not [f for f in waiting.findings if f.id == "cpu_contention"]
    computing = advise(_capture(tmp_path / "b", job_percent=60.0, system_percent=100.0, runnable=5, threads=1))
    assert [f for f in computing.findings if f.id == "cpu_contention"]


def test_the_measured_wait_for_a_core_is_the_share_where_it_was_recorded(tmp_path):
    # mlprof run measured the stepping thread's run-queue wait: 20 of every 50 ms.
    report = advise(_capture(tmp_path, job_percent=60.0, system_percent=100.0, runnable=5, wait_ms_per_step=20))
    (finding,) = [f for f in report.findings if f.id == "cpu_contention"]
    assert finding.share == 0.4 and finding.evidence.metrics["training_thread_wait_share"] == 0.4
    assert finding.evidence.metrics["share_is"].startswith("measured")


def test_oversubscribed_threads_cost_what_the_stepping_thread_waited(tmp_path):
    # 16 torch threads on 2 cores, no other process busy: the thread waits 15 of every 50 ms for its own threads.
    store = _capture(tmp_path, job_percent=200.0, system_percent=100.0, runnable=17, threads=16,
                     job_processes=[], wait_ms_per_step=15)
    report = advise(store)
    (finding,) = [f for f in report.findings if f.id == "cpu_oversubscription"]
    assert finding.share == 0.3 and finding.severity == "critical" and finding.impact_ns == 4 * 15 * MS
    assert not [f for f in report.findings if f.id == "cpu_contention"]
