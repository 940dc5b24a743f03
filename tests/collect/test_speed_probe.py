"""The host-speed probe: timed between a window's steps, outside their spans, invisible to the profiler."""

from __future__ import annotations

import pytest

import mlprof
from mlprof.collect.speed_probe import SpeedProbe

from .conftest import load_json, windows_of

torch = pytest.importorskip("torch")


def _profile(out, active: int):
    """A CPU profile recording ``active`` steps after one warm-up step, parsed by nobody."""
    return mlprof.profile(
        activities=[mlprof.ProfilerActivity.CPU],
        schedule=mlprof.schedule(wait=0, warmup=1, active=active, repeat=1),
        on_trace_ready=mlprof.tensorboard_trace_handler(out, worker_name="w0", analyse_flag=False),
    )


def test_probe_runs_outside_the_steps_and_is_not_in_the_trace(tmp_path):
    # A job with no matrix product at all: any aten::mm in the trace would be the probe's.
    weight = torch.randn(256, requires_grad=True)
    x = torch.randn(64, 256)
    with _profile(tmp_path / "result", active=8) as prof:
        for _ in range(10):
            for _ in range(50):  # a step of a few ms, so the probe is due after most steps
                (x * weight).tanh().sum().backward()
            prof.step()
    (window,) = windows_of(prof.capture_dir)
    steps = load_json(window / "steps.json")
    probed = [s for s in steps if s.get("speed_probe_ns")]
    assert probed and steps[0]["speed_probe_ns"] > 0  # the first recorded step always gets one
    names = {e.get("name") for e in load_json(window / "kineto.pt.trace.json")["traceEvents"]}
    assert "aten::tanh" in names and not {"aten::mm", "aten::matmul"} & names
    # Between steps: the gap to the next step holds the probe (its thread CPU time fits in that wall time).
    gaps = [(after["start_ns"] - before["end_ns"], before["speed_probe_ns"])
            for before, after in zip(steps, steps[1:]) if before.get("speed_probe_ns")]
    assert gaps and all(gap >= probe_ns for gap, probe_ns in gaps)


def test_probe_keeps_to_its_share_of_the_time():
    probe = SpeedProbe()
    first = probe.maybe_run()
    assert first is not None and first > 0
    assert probe.maybe_run() is None  # not due again until first / PROBE_SHARE ns have passed


def test_a_failing_probe_is_switched_off_and_profiling_goes_on(tmp_path, monkeypatch, caplog):
    import logging

    def broken(self):
        raise RuntimeError("injected")

    monkeypatch.setattr(SpeedProbe, "maybe_run", broken)
    weight = torch.randn(64, requires_grad=True)
    with caplog.at_level(logging.WARNING, logger="mlprof"):
        with _profile(tmp_path / "r", active=4) as prof:
            for _ in range(6):
                (weight * 2).sum().backward()
                prof.step()
    (window,) = windows_of(prof.capture_dir)
    steps = load_json(window / "steps.json")
    assert len(steps) == 4 and not any(s.get("speed_probe_ns") for s in steps)
    warnings = [r.getMessage() for r in caplog.records if "speed probe" in r.getMessage()]
    assert len(warnings) == 1 and "injected" in warnings[0]


def test_the_traces_step_spans_end_before_the_probe(tmp_path):
    # The probe is mlprof's work: the trace's ProfilerStep#N ends where mlprof's record of step N does, so
    # the probe lies between two spans and is never charged to the step before (as Python outside ops).
    weight = torch.randn(256, requires_grad=True)
    x = torch.randn(64, 256)
    with _profile(tmp_path / "result", active=8) as prof:
        for _ in range(10):
            for _ in range(50):
                (x * weight).tanh().sum().backward()
            prof.step()
    (window,) = windows_of(prof.capture_dir)
    probe_ns = {s["step"]: s["speed_probe_ns"] for s in load_json(window / "steps.json") if s.get("speed_probe_ns")}
    spans = {int(e["name"].split("#")[1]): (e["ts"], e["ts"] + e["dur"])
             for e in load_json(window / "kineto.pt.trace.json")["traceEvents"]
             if str(e.get("name", "")).startswith("ProfilerStep#")}
    gaps = [(spans[n + 1][0] - spans[n][1], probe_ns[n] / 1_000) for n in probe_ns if n + 1 in spans]
    # The probe's thread CPU time fits in the wall time between the spans (microseconds in the trace).
    assert gaps and all(gap_us >= 0.9 * probe_us for gap_us, probe_us in gaps), gaps
