"""Growth across steps on real CPU loops under `mlprof run` (a subprocess, as a user runs it): a loop that keeps
every step's held-out loss tensor grows the process by MBs a step and is told so, with the ops that allocated
what is never freed; its twin (.item() under no_grad) and a healthy loop whose memory plateaus are not; a
tensor concatenated onto every step is growing work. Load-sensitive (step times): in QUIET_FILES."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mlprof.analysis.advisor import advise
from mlprof.tables.store import TableStore

pytest.importorskip("torch")
pytestmark = [pytest.mark.torch, pytest.mark.slow]

JOBS = Path(__file__).resolve().parents[1] / "scenarios" / "diagnosis_jobs.py"
MB = 2**20


def _run(tmp_path: Path, scenario: str, *options: str, fixed: bool = False) -> TableStore:
    out = tmp_path / (scenario + ("_fixed" if fixed else ""))
    env = {**os.environ, "MLPROF_LOCK_DIR": str(out / "locks")}
    cmd = [sys.executable, "-m", "mlprof", "run", "--output", str(out / "result"), "--skip-first", "2",
           "--active", "5", *options, "--", sys.executable, str(JOBS), scenario, "--out", str(out / "job"),
           # A 5-step window from step 2: 60 steps leave the memory trend 50 steps after it (not the default 150).
           "--growth-steps", "60", "--seconds", "0"]
    done = subprocess.run(cmd + (["--fixed"] if fixed else []), env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    (tables,) = (out / "result").glob("*_mlprof/mlprof_output/tables")
    return TableStore(tables)


def _growth(store: TableStore, rule_id: str):
    return [f for f in advise(store).findings if f.id == rule_id]


def test_kept_loss_tensors_grow_memory_every_step_and_the_twin_does_not(tmp_path):
    with _run(tmp_path, "kept_eval_loss") as store:
        meta = dict(store.rows("SELECT key, value_json FROM metadata WHERE key LIKE 'capture.%steps%'"))
        (f,) = _growth(store, "memory_growth")
    # mlprof run counted the job's 60 steps on after its profiler stopped at step 7.
    assert json.loads(meta["capture.job_steps"]) >= 55
    m = f.evidence.metrics
    # Each kept loss holds the held-out forward's activations: 512 x 1024 floats (2 MB) a layer, a few layers.
    assert m["source"] == "rss" and 2 * MB <= m["bytes_per_step"] <= 16 * MB
    assert m["steps_judged"] >= 30 and m["steps_to_oom"] > 0 and m["oom_step"] > 60
    assert f.severity in ("critical", "warning")
    with _run(tmp_path, "kept_eval_loss", fixed=True) as store:
        assert _growth(store, "memory_growth") == []


def test_a_healthy_loop_whose_memory_plateaus_is_not_growth(tmp_path):
    with _run(tmp_path, "clean_long") as store:
        assert _growth(store, "memory_growth") == []
        assert [f for f in _growth(store, "work_growth") if f.severity != "info"] == []


@pytest.mark.long  # the allocator's view; the rule's golden test: test_rules_golden_growth.py
def test_profile_memory_names_the_ops_whose_blocks_are_never_freed(tmp_path):
    with _run(tmp_path, "kept_eval_loss", "--profile-memory") as store:
        (f,) = _growth(store, "memory_growth")
    ops = [o["op"] for o in f.evidence.ops]
    # The kept graph holds what autograd saved in the held-out forward: the ReLUs' outputs (clamp_min on a
    # CPU, 2 MB each) and the loss's log-softmax.
    assert "aten::clamp_min" in ops[:2] and "aten::_log_softmax" in ops, ops
    assert f.evidence.ops[0]["steps"] >= 3 and f.evidence.ops[0]["bytes"] >= 3 * 2 * MB
    m = f.evidence.metrics
    assert m["source"] == "allocator" or m.get("allocator_bytes_per_step", 0) > MB


def test_a_tensor_concatenated_onto_every_step_is_growing_work(tmp_path):
    # More profiled steps than the benchmark's 5: on a shared machine five must rise without one fall, and
    # 12 steps from step 2 (a small buffer still) left no finding once in a fresh-clone suite: 24.
    with _run(tmp_path, "cat_buffer", "--active", "24") as store:
        (f,) = _growth(store, "work_growth")
    assert f.severity in ("critical", "warning") and f.evidence.metrics["ns_per_step"] > 0
    assert f.evidence.metrics["op"] == "aten::cat" or "diagnosis_jobs.py" in f.title, f.title
