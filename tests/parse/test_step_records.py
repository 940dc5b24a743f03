"""mlprof's own per-step records (steps.json: CPU time, wait for a core) joined to Kineto's ProfilerStep spans."""

from __future__ import annotations

from mlprof.parse import ParseOptions, parse_path
from mlprof.tables.store import TableStore

from .conftest import BASE_NS, make_capture
from .test_golden import X

TID = 11


def _steps_table(tmp_path, record_start_us: dict[int, float]):
    # Three 273 ms steps; mlprof's record of each starts where the span starts unless told otherwise.
    events = [X(f"ProfilerStep#{i}", 1000.0 + i * 273_000, 273_000.0, cat="user_annotation", tid=TID)
              for i in range(3)]
    records = []
    for i in range(3):
        start_us = record_start_us.get(i, 1000.0 + i * 273_000)
        records.append({"step": i, "start_ns": BASE_NS + int(start_us * 1000),
                        "end_ns": BASE_NS + int((1000.0 + (i + 1) * 273_000) * 1000),
                        "cpu_ns": 50_000_000, "cpu_wait_ns": 200_000_000, "thread_cpu_ns": 50_000_000})
    capture = make_capture(tmp_path / "cap", {0: {"events": events, "steps": records}})
    result = parse_path(capture, ParseOptions(output_dir=tmp_path / "out"))[0]
    with TableStore(result.tables_dir) as store:
        return {step: wait for step, wait in store.rows("SELECT step, cpu_wait_ns FROM steps ORDER BY step")}


def test_a_record_that_starts_late_inside_its_span_keeps_its_wait(tmp_path):
    # Step 1's record starts 36 ms into its span (the hook preempted between two steps on a loaded host).
    waits = _steps_table(tmp_path, {1: 1000.0 + 273_000 + 36_000})
    assert waits == {0: 200_000_000, 1: 200_000_000, 2: 200_000_000}


def test_a_record_of_another_time_is_not_borrowed(tmp_path):
    # Step 1's record starts after its span ended (a renumbered trace): no figures for that step.
    waits = _steps_table(tmp_path, {1: 1000.0 + 2 * 273_000 + 10})
    assert waits[1] is None and waits[0] == 200_000_000


def test_a_step_the_profilers_stop_cut_is_no_step(tmp_path):
    # Steps 0-2 whole, then step 3 begun by step() and cut 0.1 ms later by the profiler's stop: mlprof marks
    # its record partial, and neither it nor the trace's ProfilerStep#3 is a step (it made every default
    # capture's last "step" 0.1 ms long: the worst step 0 ns, a drop that read as a jump in step time).
    events = [X(f"ProfilerStep#{i}", 1000.0 + i * 273_000, 273_000.0, cat="user_annotation", tid=TID)
              for i in range(3)]
    events.append(X("ProfilerStep#3", 1000.0 + 3 * 273_000, 100.0, cat="user_annotation", tid=TID))
    records = [{"step": i, "start_ns": BASE_NS + int((1000.0 + i * 273_000) * 1000),
                "end_ns": BASE_NS + int((1000.0 + (i + 1) * 273_000) * 1000)} for i in range(3)]
    records.append({"step": 3, "start_ns": records[-1]["end_ns"], "end_ns": records[-1]["end_ns"] + 100_000,
                    "partial": True})
    for name, window in (("kineto", {"events": events, "steps": records}), ("mlprof", {"steps": records})):
        capture = make_capture(tmp_path / name, {0: window})
        result = parse_path(capture, ParseOptions(output_dir=tmp_path / f"{name}_out"))[0]
        with TableStore(result.tables_dir) as store:
            assert store.rows("SELECT step, source FROM steps ORDER BY step") == [(i, name) for i in range(3)]


def test_a_trace_ending_in_a_piece_of_a_step_leaves_it_out_and_keeps_a_short_last_batch(tmp_path):
    # torch's stop() closes the ProfilerStep#N its last step() had just opened: a trace with no mlprof records
    # (a plain torch.profiler trace) ends in a piece of a step. A tenth of the other steps or less is such a
    # piece; a last batch of 40% is a step (a short final batch of the epoch).
    def steps_of(last_us: float, name: str) -> list[int]:
        events = [X(f"ProfilerStep#{i}", 1000.0 + i * 273_000, 273_000.0, cat="user_annotation", tid=TID)
                  for i in range(3)]
        events.append(X("ProfilerStep#3", 1000.0 + 3 * 273_000, last_us, cat="user_annotation", tid=TID))
        capture = make_capture(tmp_path / name, {0: {"events": events}})
        result = parse_path(capture, ParseOptions(output_dir=tmp_path / f"{name}_out"))[0]
        with TableStore(result.tables_dir) as store:
            return [r[0] for r in store.rows("SELECT step FROM steps ORDER BY step")]

    assert steps_of(50.0, "piece") == [0, 1, 2]
    assert steps_of(0.4 * 273_000, "short_batch") == [0, 1, 2, 3]
