"""Runs vs ranks: cross-rank findings only among the ranks of one job."""

from __future__ import annotations

import pytest

from mlprof.analysis.jobs import SAME_LAUNCH_WINDOW_NS, RunIdentity, group_jobs

from trace_events import BASE_NS

T0 = BASE_NS


def rid(source, rank=0, world=1, launch=None, start=T0, pid=1):
    return RunIdentity(source=source, rank=rank, world_size=world, host="h", pid=pid, launch=launch, start_ns=start)


def sources(groups):
    return [[m.source for m in job] for job in groups.jobs]


def test_single_process_runs_in_one_folder_are_separate_jobs():
    # The README's layout: two `mlprof run`s of one script, both rank 0 of world size 1.
    g = group_jobs([rid("a"), rid("b", start=T0 + 60 * 10**9)])
    assert sources(g) == [["a"], ["b"]] and g.warnings == []


def test_two_traces_of_one_process_without_rank_are_separate_runs():
    g = group_jobs([rid("t1", rank=None, world=None), rid("t2", rank=None, world=None)])
    assert sources(g) == [["t1"], ["t2"]]


def test_ranks_of_one_launch_form_one_job_and_relaunches_another():
    members = [rid(f"r{r}", rank=r, world=2, launch="host:29500", start=T0 + r) for r in (1, 0)]
    later = [rid(f"late{r}", rank=r, world=2, launch="host:29500", start=T0 + 2 * SAME_LAUNCH_WINDOW_NS + r)
             for r in (0, 1)]
    other = [rid(f"x{r}", rank=r, world=2, launch="run-xyz", start=T0) for r in (0, 1)]
    g = group_jobs(members + later + other)
    assert sorted(sources(g)) == [["late0", "late1"], ["r0", "r1"], ["x0", "x1"]]


def test_a_rank_seen_twice_in_one_job_is_a_warning_and_kept_once():
    g = group_jobs([rid("a", rank=0, world=2, launch="j"), rid("b", rank=1, world=2, launch="j"),
                    rid("c", rank=1, world=2, launch="j", start=T0 + 5)])
    assert sources(g) == [["a", "b"]]
    assert len(g.warnings) == 1 and "rank 1 appears twice" in g.warnings[0]


def test_rankless_traces_are_ranks_only_when_they_communicate_at_the_same_time():
    def t(source, start, end, comm=True, pid=None):
        return RunIdentity(source=source, rank=None, world_size=None, host=None, pid=pid, launch=None,
                           start_ns=start, end_ns=end, communicates=comm)

    together = group_jobs([t("a", T0, T0 + 100), t("b", T0 + 5, T0 + 90)])
    assert sources(together) == [["a", "b"]]
    one_after_other = group_jobs([t("a", T0, T0 + 100), t("b", T0 + 200, T0 + 300)])
    assert sources(one_after_other) == [["a"], ["b"]]
    no_collectives = group_jobs([t("a", T0, T0 + 100, comm=False), t("b", T0, T0 + 100, comm=False)])
    assert sources(no_collectives) == [["a"], ["b"]]


@pytest.mark.long  # two real `mlprof run`s, 42 s; the grouping rules above are judged on hand-built traces
def test_two_mlprof_runs_in_one_output_folder_are_not_ranks(tmp_path, monkeypatch):
    """The README's layout: run a script twice into one --output; the slower run is no 'slow rank'."""
    import subprocess
    import sys
    from pathlib import Path

    pytest.importorskip("torch")
    from mlprof.workflow import advise as advise_path

    monkeypatch.setenv("MLPROF_LOCK_DIR", str(tmp_path / "locks"))
    script = Path(__file__).parents[1] / "run" / "train_script.py"
    for sleep in ("0", "0.05"):
        done = subprocess.run([sys.executable, "-m", "mlprof", "run", "--output", str(tmp_path / "out"),
                               "--skip-first", "1", "--active", "3", "--", sys.executable, str(script), "8",
                               "--sleep-s", sleep], capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
    reports = advise_path(tmp_path / "out")
    assert len(reports) == 2
    assert not any(f.id == "slow_rank" for r in reports for f in r.findings)
    cli = subprocess.run([sys.executable, "-m", "mlprof", "cluster", str(tmp_path / "out")],
                         capture_output=True, text=True, timeout=300)
    assert cli.returncode == 0, cli.stderr
    assert "2 separate jobs or runs" in cli.stdout and " is slow" not in cli.stdout
