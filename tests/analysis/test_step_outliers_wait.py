"""step_outliers on steps whose measured wait for a CPU core explains (or does not explain) their slowness.

Hand-built captures (steps.json with ``cpu_wait_ns``) through the real parser
and the real advisor.
"""

from __future__ import annotations

import json

from mlprof.analysis.advisor import advise
from mlprof.parse import ParseOptions, parse_path
from mlprof.tables.store import TableStore

from trace_events import BASE_NS

T0 = BASE_NS
MS = 1_000_000


def _capture(root, work_ms: list[float], wait_ms: list[float] | None) -> TableStore:
    window = root / "raw" / "window_0000"
    window.mkdir(parents=True)
    steps, t = [], T0
    for i, work in enumerate(work_ms):
        wait = int((wait_ms[i] if wait_ms else 0) * MS)
        step = {"step": i, "start_ns": t, "end_ns": t + int(work * MS) + wait, "cpu_ns": int(work * MS)}
        if wait_ms is not None:
            step["cpu_wait_ns"] = wait
        steps.append(step)
        t = step["end_ns"]
    (window / "steps.json").write_text(json.dumps(steps))
    (window / "window.json").write_text(json.dumps({"index": 0, "status": "complete", "files": {"steps": "steps.json"}}))
    (root / "profiler_info.json").write_text(json.dumps({
        "schema_version": 1, "kind": "mlprof.capture", "status": "finished", "rank": 0, "world_size": 1,
        "windows": [{"index": 0, "dir": "raw/window_0000", "status": "complete"}], "created_wall_ns": T0}))
    return TableStore(parse_path(root, ParseOptions())[0].tables_dir)


def _outliers(store):
    return [f for f in advise(store).findings if f.id == "step_outliers"]


WORK = [10, 10, 10, 10, 10, 10, 10, 10]


def test_steps_slow_only_by_waiting_for_a_core_are_an_info_line(tmp_path):
    # Steps 2 and 5 take 3x the median, all of it waiting for a core.
    store = _capture(tmp_path / "waited", WORK, [0, 0, 20, 0, 0, 20, 0, 0])
    (finding,) = _outliers(store)
    assert finding.severity == "info"
    assert "waiting for a CPU core" in finding.title and "40.0 ms" in finding.title
    assert finding.evidence.metrics["waited_for_cpu_ns"] == 40 * MS
    assert "cpu_contention" in finding.fix


def test_the_same_slow_steps_without_a_wait_are_a_warning(tmp_path):
    slow_work = [10, 10, 30, 10, 10, 30, 10, 10]
    store = _capture(tmp_path / "worked", slow_work, [0] * 8)
    (finding,) = _outliers(store)
    assert finding.severity in ("warning", "critical")
    assert "CPU core" not in finding.title and "waited_for_cpu_ns" not in finding.evidence.metrics


def test_slow_steps_that_waited_a_little_are_still_a_warning(tmp_path):
    # 20 ms more work and 2 ms of wait: the wait explains a tenth; the outliers stand.
    store = _capture(tmp_path / "both", [10, 10, 30, 10, 10, 30, 10, 10], [0, 0, 2, 0, 0, 2, 0, 0])
    (finding,) = _outliers(store)
    assert finding.severity in ("warning", "critical") and "CPU core" not in finding.title


def test_without_measured_waits_the_rule_judges_wall_time(tmp_path):
    # An older capture or a plain trace: no cpu_wait_ns, so nothing is explained away.
    store = _capture(tmp_path / "old", [10, 10, 30, 10, 10, 30, 10, 10], None)
    (finding,) = _outliers(store)
    assert finding.severity in ("warning", "critical")


def test_many_preempted_steps_and_a_few_truly_slow_ones_count_only_the_slow_ones(tmp_path):
    # A loaded host: 5 of 20 steps preempted for 25 ms, and 3 other steps do 30 ms more work (periodic work).
    work = [10.0] * 20
    wait = [0.0] * 20
    for i in (1, 5, 9, 13, 17):
        wait[i] = 25.0
    for i in (4, 10, 16):
        work[i] = 40.0
    (finding,) = _outliers(_capture(tmp_path / "loaded", work, wait))
    m = finding.evidence.metrics
    assert m["outliers"] == 3 and m["excess_ns"] == 3 * 30 * MS, "judged without the steps that waited"
    assert m["waiting_steps_left_out"] and "besides those slow by waiting for a CPU core" in finding.title
    assert {s["step"] for s in finding.evidence.steps} == {4, 10, 16}


def test_steps_that_waited_for_most_of_their_excess_are_contention_even_when_threads_amplify_it(tmp_path):
    # Intra-op threads on a loaded host: the stepping thread's own wait is 60-70% of a slow step's excess; the
    # rest is blocked time waiting for a helper thread that waited for a core. Not the code: info.
    work = [40.0] * 20
    wait = [0.0] * 20
    for i, (extra, waited) in {3: (500, 330), 9: (700, 460), 14: (400, 250), 18: (300, 200)}.items():
        work[i] += extra - waited
        wait[i] = waited
    (finding,) = _outliers(_capture(tmp_path / "threads", work, wait))
    assert finding.severity == "info" and "waiting for a CPU core" in finding.title
