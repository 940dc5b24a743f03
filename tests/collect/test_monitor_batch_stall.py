"""Monitor mode's triggers on steps timed in batches, with real torch (collect/monitor.py, BATCH_NS).

Judges step timings (a stall against the running median): it runs alone, in tests/conftest.py's quiet group,
since another test's busy core could itself look like stalls before the planted ones.
"""

from __future__ import annotations

import json

import pytest

pytest.importorskip("torch")

from .test_monitor_api import _train  # noqa: E402


def test_a_window_still_opens_on_a_stall_seen_inside_a_batch(tmp_path):
    """Triggers judge each step of a batch as if alone: stalls among short steps open a window."""
    prof = _train(tmp_path, 400, stall_s=lambda step: 0.02 if step >= 200 and step % 5 == 0 else 0.0)
    info = json.loads((prof.capture_dir / "job_monitor.json").read_text())
    assert info["batched_steps"] > 0
    triggered = [w for w in info["windows"] if w["reason"] != "baseline"]
    assert triggered and triggered[0]["reason"] in ("slow_steps", "throughput_drop")
    assert 200 <= triggered[0]["trigger_step"] < 300
