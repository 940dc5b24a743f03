"""`mlprof callsites --phase P` on a capture whose Python samples all fall in other phases (issue 34).

It said "no Python samples in the captured steps: profile with `mlprof run`" of a capture made by
`mlprof run` holding 76 samples. The truth: no time (or too little for the sampler) fell in that phase.
"""

from __future__ import annotations

import json
import subprocess
import sys

from parse.conftest import BASE_NS, make_capture
from test_rules_golden import X

US = 1_000
FRAMES = [["/home/u/train.py", 40, "main"], ["/home/u/train.py", 20, "log"]]


def _capture(tmp_path, with_samples: bool = True):
    """5 steps of 1 ms: a 100 us op, then 900 us of Python, sampled 4 times a step (all in the Python)."""
    events, samples = [], []
    for k in range(5):
        t0 = k * 1_000
        events += [X(f"ProfilerStep#{k + 1}", t0, 1_000, cat="user_annotation"), X("aten::mm", t0 + 10, 100)]
        samples += [[BASE_NS + (t0 + 200 + 150 * i) * US, 0] for i in range(4 if with_samples else 0)]
    return make_capture(tmp_path / "cap", {0: {"events": events, "python_samples": {
        "interval_ns": 150 * US, "tid": 11, "frames": FRAMES, "stacks": [[0, 1]], "samples": samples}}})


def _callsites(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mlprof", "callsites", *args], capture_output=True, text=True,
                          timeout=120)


def test_a_phase_without_samples_says_where_the_samples_fell(tmp_path):
    capture = str(_capture(tmp_path))
    everything = json.loads(_callsites(capture, "--json").stdout)
    phases = {r["phase"] for r in everything["call_sites"]}
    assert phases == {"python"}, phases

    done = _callsites(capture, "--phase", "gc")
    assert done.returncode == 0, done.stderr
    assert "no time of the captured steps fell in the gc phase; the Python samples fell in: python (20)" in done.stdout
    assert "no Python samples" not in done.stdout and "profile with" not in done.stdout

    data = json.loads(_callsites(capture, "--phase", "gc", "--json").stdout)
    assert data["call_sites"] == [] and data["samples_by_phase"] == {"python": 20} and data["phase_ns"] == 0


def test_a_phase_with_time_but_no_samples_says_so(tmp_path):
    capture = str(_capture(tmp_path))
    # The op's 100 us a step is forward time (the parser's attribution) that the samples, all in the Python
    # after it, never hit.
    done = _callsites(capture, "--phase", "forward", "--step", "2")
    assert "0.10 ms of step 2 fell in the forward phase, too little for the Python sampler to see" in done.stdout
    assert "the Python samples fell in: python (4)" in done.stdout


def test_no_samples_at_all_still_says_how_to_get_them(tmp_path):
    done = _callsites(str(_capture(tmp_path, with_samples=False)), "--phase", "gc")
    assert "no Python samples in the captured steps: profile with `mlprof run`" in done.stdout
