"""`mlprof run --monitor` on real CPU training jobs: every step in job_steps.csv, windows where the steps go
wrong, and the advisor's periodic stall. Timing-dependent (a stall must stand out of the noise): QUIET."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

# Long: runs with MLPROF_LONG_TESTS=1 (tests/conftest.py LONG_FILES).

pytest.importorskip("torch")
JOB = Path(__file__).with_name("monitor_job.py")
MLPROF = [sys.executable, "-m", "mlprof"]


def monitored(out: Path, steps: int, *job_args: str) -> tuple[Path, dict]:
    result = subprocess.run([*MLPROF, "run", "--monitor", "--output", str(out), "--", sys.executable, str(JOB),
                             str(steps), *job_args], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    (capture,) = sorted(out.glob("*_mlprof"))
    return capture, json.loads((capture / "job_monitor.json").read_text())


def job_steps(capture: Path) -> list[dict]:
    with open(capture / "mlprof_output" / "job_steps.csv") as f:
        return list(csv.DictReader(f))


def reasons(info: dict) -> list[str]:
    return [w["reason"] for w in info["windows"]]


def test_a_periodic_stall_is_caught_in_a_window_and_named_with_its_line_and_period(tmp_path):
    capture, info = monitored(tmp_path / "out", 320, "--kind", "stall", "--from", "120", "--every", "5")
    rows = job_steps(capture)
    # Every step of the job, once, in order (the boundary is the optimizer step: 319 whole steps).
    assert [int(r["Step"]) for r in rows] == list(range(319)) and {r["Steps"] for r in rows} == {"1"}
    assert reasons(info)[0] == "baseline" and "slow_steps" in reasons(info), info
    triggered = next(w for w in info["windows"] if w["reason"] == "slow_steps")
    assert triggered["trigger_step"] >= 118
    # The triggered window covers steps of the stall's phase (the stall repeats, so some of them stall).
    covered = [r for r in rows if r["Covered By Window"] == "1"]
    assert covered and min(int(r["Step"]) for r in covered) == triggered["first_step"]
    assert [r["Trigger"] for r in rows if r["Trigger"]] == ["baseline", "slow_steps"]
    advice = subprocess.run([*MLPROF, "advise", "--json", str(capture)], capture_output=True, text=True, timeout=300)
    assert advice.returncode == 0, advice.stderr[-2000:]
    findings = [f for r in json.loads(advice.stdout) for f in r["findings"]]
    stall = next(f for f in findings if f["id"] == "periodic_stall")
    assert stall["evidence"]["metrics"]["period_steps"] == 5, stall
    assert stall["evidence"]["metrics"]["window"] == 1
    assert "slow_python_call" in stall["evidence"]["call_sites"][0]["call_site"], stall
    assert "every 5 steps" in stall["title"] and "monitor_job.py" in stall["title"]
    query = subprocess.run([*MLPROF, "query", str(capture)], capture_output=True, text=True, timeout=300)
    assert "monitored steps  319" in query.stdout and "slow_steps after step" in query.stdout, query.stdout


def test_a_lasting_slowdown_opens_a_throughput_drop_window(tmp_path):
    _capture, info = monitored(tmp_path / "out", 260, "--kind", "slowdown", "--from", "120")
    assert reasons(info)[0] == "baseline" and "throughput_drop" in reasons(info), info
    assert next(w for w in info["windows"] if w["reason"] == "throughput_drop")["trigger_step"] >= 118


def test_memory_that_keeps_growing_opens_a_memory_growth_window(tmp_path):
    _capture, info = monitored(tmp_path / "out", 400, "--kind", "leak", "--from", "120")
    assert reasons(info)[0] == "baseline" and "memory_growth" in reasons(info), info


def test_a_steady_job_gets_its_baseline_window_only(tmp_path):
    capture, info = monitored(tmp_path / "out", 400, "--kind", "steady")
    assert reasons(info) == ["baseline"], info
    rows = job_steps(capture)
    assert len(rows) == 399 and [r["Trigger"] for r in rows if r["Trigger"]] == ["baseline"]


def test_dataloader_time_is_in_every_step_that_fetched_a_batch(tmp_path):
    out = tmp_path / "out"
    script = Path(__file__).with_name("train_script.py")  # batches from a DataLoader, optimizer steps
    result = subprocess.run([*MLPROF, "run", "--monitor", "--output", str(out), "--", sys.executable, str(script),
                             "30"], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    (capture,) = sorted(out.glob("*_mlprof"))
    rows = job_steps(capture)
    assert len(rows) == 30  # the first batch opens the profile (on_batch), then 30 optimizer steps
    # Each step from the second on fetched its batch inside the step (the first was fetched before it).
    assert all(float(r["Data(us)"]) > 0 for r in rows[1:]), [r["Data(us)"] for r in rows]
    assert all(int(r["Memory(bytes)"]) > 0 for r in rows)
