"""`mlprof run -- CMD`: profiling an unmodified command, as a real subprocess."""

from __future__ import annotations

import csv
import json
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mlprof.collect.device_lock import DeviceLock, host_has_accelerator
from mlprof.collect.run_options import RunOptions
from mlprof.collect.storage import age_out
from mlprof.errors import MlprofError

pytest.importorskip("torch")
SCRIPT = Path(__file__).with_name("train_script.py")
MLPROF = [sys.executable, "-m", "mlprof"]


def mlprof_run(out: Path, *cmd: str, options=(), timeout=300) -> subprocess.CompletedProcess:
    return subprocess.run([*MLPROF, "run", "--output", str(out), *options, "--", *cmd],
                          capture_output=True, text=True, timeout=timeout)


def captures(out: Path) -> list[Path]:
    return sorted(out.glob("*_mlprof"))


def window_steps(capture: Path) -> list[list[int]]:
    return [[s["step"] for s in json.loads((w / "steps.json").read_text())]
            for w in sorted((capture / "raw").glob("window_*"))]


def test_samples_after_the_capture_are_thinned_evenly_to_the_jobs_end():
    from types import SimpleNamespace

    from mlprof.collect.runner import thin_tail

    samples = [SimpleNamespace(ts_ns=t) for t in range(100)]
    kept = thin_tail(samples, last_ns=9, keep=9)
    assert [s.ts_ns for s in kept] == list(range(10)) + [19, 29, 39, 49, 59, 69, 79, 89, 99]
    assert thin_tail(samples, last_ns=89, keep=20) == samples
    assert thin_tail(samples, last_ns=49, keep=0) == samples[:50]


def test_run_profiles_an_unmodified_script_and_parses_it(tmp_path):
    result = mlprof_run(tmp_path / "out", sys.executable, str(SCRIPT), "14",
                        options=["--host-sys", "cpu,mem,disk,network", "--host-sys-freq", "20"])
    assert result.returncode == 0, result.stderr
    (capture,) = captures(tmp_path / "out")
    # Skip 5, warm up 1, then the window sized by evidence: this short job ends first, and the window
    # open at exit is saved with every step it recorded.
    (window,) = window_steps(capture)
    assert window == list(range(6, window[-1] + 1)) and len(window) >= 8
    # Profiled steps against warm unprofiled ones: steps 2-4 of --skip-first (0 and 1 are cold).
    info = json.loads((capture / "profiler_info.json").read_text())
    times = info["step_times"]
    assert times["unprofiled_steps"] == 3 and times["profiled_steps"] >= 3
    assert times["profiled_median_ns"] > 0 and times["unprofiled_median_ns"] > 0
    # The job ended inside the window's last step: mlprof marked it partial, and the parse leaves it out.
    records = json.loads((capture / "raw" / "window_0000" / "steps.json").read_text())
    assert records[-1].get("partial") and not any(r.get("partial") for r in records[:-1])
    with open(capture / "mlprof_output" / "step_trace_time.csv", newline="") as f:
        assert [int(r["Step"]) for r in csv.DictReader(f)] == window[:-1]
    with open(capture / "mlprof_output" / "op_statistic.csv", newline="") as f:
        assert any(r["Op Name"].startswith("aten::") for r in csv.DictReader(f))
    samples = json.loads((capture / "host_samples.json").read_text())
    assert samples and all("job_cpu_percent" in s and "net_recv_bytes_per_s" in s for s in samples)
    # The sampler's file was attached to the capture, and is not left at the --output root (issue 30, item 12).
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [capture.name]
    assert max(s["job_rss_bytes"] for s in samples) > 50 * 2**20, "the job's memory was not sampled"
    # No sample is written once the job has gone (it would show a job using nothing).
    assert all(s["cpu_count"] >= 1 and s["job_threads"] >= 1 and isinstance(s["top_processes"], list)
               for s in samples), [s for s in samples if s.get("job_threads", 0) < 1]
    # procs_running is absent from /proc/stat in some sandboxes; where present it is an int.
    assert all(isinstance(s.get("runnable_threads", 0), int) for s in samples)
    with open(capture / "mlprof_output" / "host_resources.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == len(samples)
    assert int(rows[0]["Job RSS(bytes)"]) == samples[0]["job_rss_bytes"]
    trace = json.loads((capture / "mlprof_output" / "trace_view.json").read_text())
    counters = {e["name"] for e in trace["traceEvents"] if e.get("ph") == "C"}
    assert {"host_cpu", "host_memory", "host_disk", "host_network"} <= counters
    assert "1 capture(s)" in result.stderr


def test_run_samples_python_stacks_records_modules_and_gc_by_default(tmp_path):
    # 30 ms steps: a window of 3 steps spans several 10 ms sampling intervals.
    result = mlprof_run(tmp_path / "out", sys.executable, str(SCRIPT), "10", "--sleep-s", "0.03", options=["--no-parse"])
    assert result.returncode == 0, result.stderr
    (capture,) = captures(tmp_path / "out")
    config = json.loads((capture / "profiler_info.json").read_text())["config"]["experimental_config"]
    assert config["gc_detect_threshold"] == 1.0
    assert config["python_sampling"] is True and config["record_modules"] is True
    (window,) = sorted((capture / "raw").glob("window_*"))
    files = json.loads((window / "window.json").read_text())["files"]
    assert files["gc"] == "gc.json" and (window / "gc.json").is_file()
    samples = json.loads((window / files["python_samples"]).read_text())
    assert samples["samples"] and any(f[0] == str(SCRIPT) for f in samples["frames"])
    modules = json.loads((window / files["modules"]).read_text())
    paths = {entry[0] for entry in modules["modules"]}
    assert {"Sequential", "Sequential.0", "Sequential.1", "Sequential.2"} <= paths
    forwards = [c for c in modules["calls"] if modules["modules"][c[0]][0] == "Sequential"]
    recorded = json.loads((window / "steps.json").read_text())
    # One forward per recorded step; the step open when the job ended (the window is saved at exit) has none.
    assert len(recorded) - 1 <= len(forwards) <= len(recorded) and len(forwards) >= 3


@pytest.mark.long  # real `mlprof run`s; CI's 20 minutes (2026-11-28: a fresh clone took 1,204 s)
def test_run_flags_turn_attribution_and_gc_off(tmp_path):
    result = mlprof_run(tmp_path / "out", sys.executable, str(SCRIPT), "10",
                        options=["--no-parse", "--no-python-sampling", "--no-record-modules",
                                 "--gc-detect-threshold", "none", "--python-sampling-interval-ms", "2"])
    assert result.returncode == 0, result.stderr
    (capture,) = captures(tmp_path / "out")
    config = json.loads((capture / "profiler_info.json").read_text())["config"]["experimental_config"]
    assert (config["gc_detect_threshold"], config["python_sampling"], config["record_modules"]) == (None, False, False)
    assert config["python_sampling_interval_ms"] == 2.0
    (window,) = sorted((capture / "raw").glob("window_*"))
    assert not (window / "python_samples.json").exists() and not (window / "modules.json").exists()


@pytest.mark.long  # real `mlprof run`s; CI's 20 minutes (2026-11-28: a fresh clone took 1,204 s)
def test_run_chooses_activities_and_turns_mstx_off(tmp_path):
    result = mlprof_run(tmp_path / "out", sys.executable, str(SCRIPT), "10",
                        options=["--no-parse", "--activities", "CPU", "--no-mstx"])
    assert result.returncode == 0, result.stderr
    (capture,) = captures(tmp_path / "out")
    config = json.loads((capture / "profiler_info.json").read_text())["config"]
    assert config["activities"] == ["CPU"] and config["experimental_config"]["mstx"] is False


def test_inference_loop_without_optimizer_uses_dataloader_batches(tmp_path):
    result = mlprof_run(tmp_path / "out", sys.executable, str(SCRIPT), "12", "--no-optimizer",
                        options=["--active", "2"])
    assert result.returncode == 0, result.stderr
    (capture,) = captures(tmp_path / "out")
    assert window_steps(capture) == [[6, 7]]


def test_failing_command_returns_its_exit_code_and_keeps_partial_data(tmp_path):
    result = mlprof_run(tmp_path / "out", sys.executable, str(SCRIPT), "100", "--fail-at", "12",
                        options=["--repeat", "0", "--skip-first", "0", "--warmup", "0", "--active", "2"])
    assert result.returncode == 3
    (capture,) = captures(tmp_path / "out")
    steps = window_steps(capture)
    assert len(steps) >= 5 and steps[0] == [0, 1]
    assert (capture / "mlprof_output" / "step_trace_time.csv").exists()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
@pytest.mark.long  # multi-rank real runs in the default suite: test_dynamic's two-rank gloo job, the dashboard's DDP runs
def test_torchrun_ddp_job_gives_one_capture_per_rank(tmp_path):
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", "--master_addr=127.0.0.1",
                f"--master_port={free_port()}"]
    result = mlprof_run(tmp_path / "out", *torchrun, str(SCRIPT), "12", "--ddp")
    assert result.returncode == 0, result.stderr[-3000:]
    ranks = {}
    for capture in captures(tmp_path / "out"):
        info = json.loads((capture / "profiler_info.json").read_text())
        ranks[info["rank"]] = (info["world_size"], window_steps(capture))
    assert set(ranks) == {0, 1} and ranks[0] == ranks[1]
    world_size, (window,) = ranks[0]
    assert world_size == 2 and window == list(range(6, window[-1] + 1)) and len(window) >= 3


@pytest.mark.slow
@pytest.mark.long  # 16 s; CI's 20 minutes (a fresh clone took 1,142-1,226 s, 2026-11-29)
def test_sigint_stops_the_job_and_keeps_finished_windows(tmp_path):
    out = tmp_path / "out"
    runner = subprocess.Popen(
        [*MLPROF, "run", "--output", str(out), "--repeat", "0", "--skip-first", "0", "--warmup", "0",
         "--active", "2", "--no-parse", "--", sys.executable, str(SCRIPT), "100000", "--sleep-s", "0.01"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        # A suite started in the background of a non-interactive shell ignores SIGINT, and an ignored signal
        # is inherited through exec: the job would never see the Ctrl-C this test sends (it ran on for good).
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 120
    while len(list(out.glob("*_mlprof/raw/window_*"))) < 3:
        assert runner.poll() is None and time.monotonic() < deadline, runner.stderr.read() if runner.poll() else ""
        time.sleep(0.05)
    runner.send_signal(signal.SIGINT)
    try:
        code = runner.wait(timeout=60)
    except subprocess.TimeoutExpired:
        runner.kill()  # and the job it started, which would otherwise run on for good
        subprocess.run(["pkill", "-KILL", "-f", f"{SCRIPT} 100000"], check=False)
        raise
    assert code == 128 + signal.SIGINT
    (capture,) = captures(out)
    finished = sorted((capture / "raw").glob("window_*"))
    assert len(finished) >= 3
    for window in finished:
        assert json.loads((window / "window.json").read_text())["status"] == "complete"
        json.loads((window / "kineto.pt.trace.json").read_text())


def test_help_lists_every_option_with_its_default():
    result = subprocess.run([*MLPROF, "run", "--help"], capture_output=True, text=True)
    assert result.returncode == 0
    text = " ".join(result.stdout.split())
    for name in RunOptions.__dataclass_fields__:
        assert f"--{name.replace('_', '-')}" in text
    assert text.count("(default:") >= len(RunOptions.__dataclass_fields__)
    assert "--storage-limit" in text and "--environment" in text


def test_environment_option_reaches_the_command(tmp_path):
    probe = "import os, sys; sys.exit(0 if os.environ.get('MLPROF_PROBE') == 'a=b' and os.environ['X2'] == '2' else 9)"
    result = mlprof_run(tmp_path / "out", sys.executable, "-c", probe,
                        options=["--environment", "MLPROF_PROBE=a=b;X2=2", "--no-parse"])
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("bad", [["--storage-limit", "100MB"], ["--level", "Level7"], ["--environment", "NOEQUALS"],
                                 ["--python-sampling-interval-ms", "0"], ["--gc-detect-threshold", "-1"],
                                 ["--activities", "NPU"]])
def test_bad_options_give_one_line_errors(tmp_path, bad):
    result = mlprof_run(tmp_path / "out", sys.executable, "-c", "pass", options=bad)
    assert result.returncode != 0
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_missing_command_is_a_clear_error(tmp_path):
    result = subprocess.run([*MLPROF, "run", "--output", str(tmp_path)], capture_output=True, text=True)
    assert result.returncode != 0 and "no command" in result.stderr


# mlprof's CLI on a host that has accelerators (this one may not: CPU-only hosts take no device lock).
AS_ON_A_GPU_HOST = [sys.executable, "-c", "import sys, mlprof.collect.device_lock as d; "
                    "d.host_has_accelerator = lambda: True; from mlprof.cli.main import main; sys.exit(main())"]


def test_a_second_run_on_the_same_device_is_refused(tmp_path):
    first = subprocess.Popen([*AS_ON_A_GPU_HOST, "run", "--output", str(tmp_path / "a"), "--no-parse", "--",
                              sys.executable, "-c", "import time; time.sleep(30)"],
                             stderr=subprocess.PIPE, text=True)
    try:
        lock_file = tmp_path / "locks" / "device-all.lock"
        deadline = time.monotonic() + 30
        while not (lock_file.exists() and lock_file.read_text()) and time.monotonic() < deadline:
            time.sleep(0.05)
        second = subprocess.run([*AS_ON_A_GPU_HOST, "run", "--output", str(tmp_path / "b"), "--", sys.executable,
                                 "-c", "pass"], capture_output=True, text=True, timeout=120)
        assert second.returncode != 0
        assert "already being profiled" in second.stderr and f"pid {first.pid}" in second.stderr
        # On this host as it is, a run beside the first is not refused when the host has no accelerator.
        if not host_has_accelerator():
            assert mlprof_run(tmp_path / "c", sys.executable, "-c", "pass", options=("--no-parse",)).returncode == 0
    finally:
        first.send_signal(signal.SIGTERM)
        first.wait(timeout=30)


def test_a_crashed_runs_lock_does_not_stay_stuck(tmp_path):
    lock_dir = tmp_path / "locks"
    lock_dir.mkdir()
    (lock_dir / "device-all.lock").write_text(json.dumps({"pid": 999999, "since": "yesterday"}))
    with DeviceLock(["all"], lock_dir):
        pass  # acquired: nobody holds the kernel lock any more
    with DeviceLock(["0", "1"], lock_dir):
        with pytest.raises(MlprofError, match="device 1 is already"):
            DeviceLock(["1"], lock_dir).acquire()
        with pytest.raises(MlprofError, match="all devices"):
            DeviceLock(["all"], lock_dir).acquire()
        DeviceLock(["2"], lock_dir).acquire().release()


def make_window(root: Path, capture: str, index: int, end_ns: int, size_bytes: int) -> Path:
    window = root / capture / "raw" / f"window_{index:04d}"
    window.mkdir(parents=True)
    (window / "window.json").write_text(json.dumps({"end_ns": end_ns}))
    (window / "kineto.pt.trace.json").write_bytes(b"x" * size_bytes)
    return window


def test_storage_limit_ages_out_the_oldest_windows_first(tmp_path):
    mb = 2**20
    keep_user_file = tmp_path / "notes.txt"
    keep_user_file.write_text("user data")
    oldest = make_window(tmp_path, "a_mlprof", 0, end_ns=100, size_bytes=3 * mb)
    middle = make_window(tmp_path, "b_mlprof", 0, end_ns=200, size_bytes=3 * mb)
    newer = make_window(tmp_path, "a_mlprof", 1, end_ns=300, size_bytes=3 * mb)
    newest = make_window(tmp_path, "b_mlprof", 1, end_ns=400, size_bytes=3 * mb)
    assert age_out(tmp_path, limit_bytes=20 * mb) == []  # 12 MB: under 90% of 20 MB
    removed = age_out(tmp_path, limit_bytes=10 * mb)  # 12 MB > 9 MB: delete down to 8 MB
    assert removed == [oldest, middle]
    assert newer.exists() and newest.exists() and keep_user_file.exists()
    assert age_out(tmp_path, limit_bytes=1 * mb) == [newer]  # the newest window always stays
    assert newest.exists()


def test_storage_limit_below_the_seed_minimum_is_refused():
    with pytest.raises(MlprofError, match="200MB"):
        RunOptions(storage_limit="199MB")
    assert RunOptions(storage_limit="1GB").storage_limit_bytes == 2**30


# The job's profiler first runs with MLPROF_LONG_TESTS=1 (tests/run/test_job_profiler.py covers that order too).
@pytest.mark.parametrize("job_profiler_from_step", [pytest.param(0, marks=pytest.mark.long), 7],
                         ids=["job-profiler-first", "mlprof-window-first"])
def test_a_job_with_its_own_torch_profiler_is_not_crashed(tmp_path, job_profiler_from_step):
    # torch runs one profiler session per process; a second one beside the
    # job's own crashed the job (exit 139) when its trace was exported.
    trace = tmp_path / "own.json"
    script = Path(__file__).with_name("own_profiler_script.py")
    result = mlprof_run(tmp_path / "out", sys.executable, str(script), "14", str(job_profiler_from_step), str(trace),
                        options=["--skip-first", "1", "--active", "8"])
    assert result.returncode == 0, result.stderr
    assert "trained" in result.stdout
    # Depending on which starts first, mlprof stops, or records its windows without Kineto.
    assert ("the job starts its own profiler" in result.stderr
            or "another torch profiler session is running" in result.stderr), result.stderr
    assert json.loads(trace.read_text())["traceEvents"], "the job's own trace must still be written"


@pytest.mark.long  # 17 s; CI's 20 minutes (a fresh clone took 1,142 s, 2026-11-29)
def test_a_job_shorter_than_the_window_says_what_to_change(tmp_path):
    result = mlprof_run(tmp_path / "out", sys.executable, str(SCRIPT), "4")
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stderr.splitlines() if "nothing was captured" in line]
    assert len(lines) == 1
    assert "ended after 4 step(s)" in lines[0] and "steps 6 on" in lines[0] and "lower --skip-first" in lines[0]


def test_the_default_window_closes_itself_once_its_steps_are_evidence_enough(tmp_path):
    # 300 short steps: the window ends on its own (20 steps and 2 s, at most 200) before the job does,
    # whatever this machine's speed.
    result = mlprof_run(tmp_path / "out", sys.executable, str(SCRIPT), "300", options=["--no-parse"])
    assert result.returncode == 0, result.stderr
    (capture,) = captures(tmp_path / "out")
    (window,) = window_steps(capture)
    # The job had 300 steps, more than skip 5 + warm-up 1 + the 200-step cap: the window closed by its rule.
    assert window[0] == 6 and window == list(range(6, window[-1] + 1))
    assert 20 <= len(window) <= 200
    # Its last step is whole: the window closes at the step after the one its schedule saved with, not at that
    # step's start (which cut every default capture's last step to a 0.1 ms piece).
    records = json.loads((capture / "raw" / "window_0000" / "steps.json").read_text())
    assert not any(r.get("partial") for r in records)
    durations = sorted(r["end_ns"] - r["start_ns"] for r in records)
    assert records[-1]["end_ns"] - records[-1]["start_ns"] >= durations[len(durations) // 2] / 10, records[-3:]
    # The steps after the profiler stopped are counted on to the job's end (memory growth is judged on them):
    # the last step number the 300-step script reaches, on the windows' numbering.
    info = json.loads((capture / "profiler_info.json").read_text())
    assert info["steps_seen"] < info["job_steps"] == 300, (info["steps_seen"], info["job_steps"])
    assert info["last_step_end_ns"] > info["windows"][-1]["end_ns"]


@pytest.mark.long  # 17 s; test_failing_command_returns_its_exit_code_and_keeps_partial_data keeps exit codes in CI (2026-11-29)
def test_a_failure_after_the_job_is_one_line_and_the_jobs_exit_code_wins(tmp_path, monkeypatch):
    import errno

    from mlprof.collect import runner

    def full_disk(capture, samples_file):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(runner, "_attach_samples", full_disk)
    options = RunOptions(output=str(tmp_path / "out"), skip_first=1, active=2)
    result = runner.run_command(options, [sys.executable, str(SCRIPT), "6"], {})
    assert result.exit_code == 0
    assert len(result.problems) == 1 and "No space left on device" in result.problems[0]
    # Samples no capture could take are kept, and the line says where.
    assert result.samples_file is not None and result.samples_file.is_file()
    assert f"kept in {result.samples_file}" in result.problems[0]
