"""Golden tests of gc_pauses and of step_outliers beside it, on tiny captures with known pauses: pauses that
recur are a finding; one full collection in a short window is a line, and the step it slowed is not a second
warning."""

from __future__ import annotations

import json
from pathlib import Path

from mlprof.analysis.advisor import advise
from mlprof.parse import ParseOptions, parse_path
from mlprof.tables.store import TableStore
from trace_events import BASE_NS, X

STEP_US = 3_000


def _capture(tmp_path: Path, pauses_us: dict[int, tuple[int, int]], steps: int = 100) -> TableStore:
    """``steps`` steps of 3 ms (an op, then 0.2 ms of Python) with, in step i, a GC pause of
    ``pauses_us[i] = (duration, generation)`` in its Python stretch (the step longer by the pause)."""
    root = tmp_path / "capture"
    window = root / "raw" / "window_0000"
    window.mkdir(parents=True)
    events, gc, t = [], [], 0
    for i in range(steps):
        pause_us, generation = pauses_us.get(i, (0, 0))
        dur = STEP_US + pause_us
        events += [X(f"ProfilerStep#{i}", t, dur, cat="user_annotation"), X("aten::addmm", t + 10, 2_790)]
        if pause_us:
            gc.append({"start_ns": BASE_NS + (t + 2_850) * 1_000, "dur_ns": pause_us * 1_000,
                       "generation": generation, "collected": 10, "uncollectable": 0, "tid": 11})
        t += dur
    (root / "profiler_info.json").write_text(json.dumps({
        "schema_version": 1, "kind": "mlprof.capture", "status": "finished", "worker_name": "w", "host": "h",
        "pid": 1, "rank": 0, "world_size": 1, "local_rank": 0, "versions": {"mlprof": "0.1.0"},
        "config": {"experimental_config": {"gc_detect_threshold": 0.1}},
        "clock": {"wall_ns": 0, "monotonic_ns": 0}, "created_wall_ns": BASE_NS,
        "windows": [{"index": 0, "dir": "raw/window_0000", "status": "complete"}], "error": None}))
    (window / "kineto.pt.trace.json").write_text(json.dumps(
        {"schemaVersion": 1, "baseTimeNanoseconds": BASE_NS, "traceEvents": events}))
    (window / "gc.json").write_text(json.dumps(gc))
    (window / "window.json").write_text(json.dumps(
        {"index": 0, "status": "complete", "level": "Level0", "files": {"kineto": "kineto.pt.trace.json",
                                                                          "gc": "gc.json"}}))
    return TableStore(parse_path(root, ParseOptions(output_dir=tmp_path / "out"))[0].tables_dir)


def _by_id(findings, rule_id):
    return [f for f in findings if f.id == rule_id]


def test_pauses_in_every_step_are_a_warning(tmp_path):
    # 0.6 ms of generation-0 collection in every 3 ms step: 17% of step time, recurring.
    with _capture(tmp_path, {i: (600, 0) for i in range(100)}) as store:
        (f,) = _by_id(advise(store).findings, "gc_pauses")
    assert f.severity == "warning" and not f.evidence.metrics["one_pause"]
    assert f.evidence.metrics["pauses"] == 100 and f.share == round(60 / 360, 4)


def test_one_full_collection_in_a_short_window_is_a_line_not_two_warnings(tmp_path):
    # One 90 ms generation-2 pause in step 50 of 100 steps of 3 ms: 23% of the window (the torch heap's full
    # collection that made a healthy twin "GC-bound" in CI), and one 31x-median step.
    with _capture(tmp_path, {50: (90_000, 2)}) as store:
        findings = advise(store).findings
    (gc,) = _by_id(findings, "gc_pauses")
    assert gc.severity == "info" and gc.evidence.metrics["one_pause"], gc.title
    assert gc.share > 0.2 and "one pause of 90 ms" in gc.title
    # The step it slowed is the GC's: no outlier finding of its own.
    assert _by_id(findings, "step_outliers") == []


def test_one_long_pause_beside_recurring_ones_still_warns(tmp_path):
    # Recurring 0.6 ms pauses (17% alone) and one 90 ms pause: the recurring ones carry the finding.
    pauses = {i: (600, 0) for i in range(100)}
    pauses[50] = (90_000, 2)
    with _capture(tmp_path, pauses) as store:
        (f,) = _by_id(advise(store).findings, "gc_pauses")
    assert f.severity in ("warning", "critical") and not f.evidence.metrics["one_pause"]


def test_slow_steps_without_a_pause_are_still_outliers(tmp_path):
    # Control for the GC exclusion: steps 20, 40, 60, 80 slow by 30 ms of Python (no pause) stay outliers.
    with _capture(tmp_path, {}) as store:
        pass
    events_dir = tmp_path / "capture" / "raw" / "window_0000"
    trace = json.loads((events_dir / "kineto.pt.trace.json").read_text())
    shifted, t = [], 0
    for ev in trace["traceEvents"]:
        if ev["name"].startswith("ProfilerStep#"):
            i = int(ev["name"].split("#")[1])
            extra = 30_000 if i % 20 == 0 and i else 0
            ev = {**ev, "ts": t, "dur": STEP_US + extra}
            start, t = t, t + STEP_US + extra
        else:
            ev = {**ev, "ts": start + 10}
        shifted.append(ev)
    (events_dir / "kineto.pt.trace.json").write_text(json.dumps({**trace, "traceEvents": shifted}))
    with TableStore(parse_path(tmp_path / "capture", ParseOptions(output_dir=tmp_path / "out2"))[0].tables_dir) as store:
        (f,) = _by_id(advise(store).findings, "step_outliers")
    assert f.evidence.metrics["outliers"] == 4 and f.severity in ("warning", "critical")
