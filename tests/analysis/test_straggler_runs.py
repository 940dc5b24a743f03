"""Why a rank straggles, on real 4-rank gloo jobs (torchrun under ``mlprof run``): one cause at a time.

Rank 2 of straggler_job.py is slowed by a GC storm, a slow input pipeline, extra forward compute or a
busy neighbour on its core; ``mlprof cluster`` must name rank 2 and that cause, from its attribution
(not from the compute/communication split), and name no rank in the balanced job. Load-dependent:
these run alone (tests/conftest.py QUIET_FILES).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

# Long: runs with MLPROF_LONG_TESTS=1 (tests/conftest.py LONG_FILES).

from mlprof.analysis.advisor import Thresholds
from mlprof.workflow import cluster

pytestmark = pytest.mark.torch

HERE = Path(__file__).parent
SLOW_RANK = 2
# mlprof's defaults: the default window of `mlprof run` (8 of the job's 12 steps) and the default
# slow-rank threshold (10% of a step). On this 2-core host with nothing else heavy running, 3 balanced jobs
# named no rank and each slowed one was named with its cause (2026-11-28); at load 9-10 of other work the
# balanced job's ranks came out up to 11-12% of a step apart in communication transit (a rank descheduled
# inside gloo's ring), so these run alone (QUIET) and in the long tier.
THRESHOLDS = Thresholds()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def straggler(tmp_path_factory):
    """Captures of straggler_job.py in one MODE (none, gc, data, forward, busy), run on first use."""
    pytest.importorskip("torch")
    made: dict[str, Path] = {}

    def get(mode: str) -> Path:
        if mode not in made:
            out = tmp_path_factory.mktemp(f"straggler_{mode}")
            env = {**os.environ, "MLPROF_LOCK_DIR": str(out / ".locks")}
            cmd = [sys.executable, "-m", "mlprof", "run", "--output", str(out / "captures"), "--", sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=4",
                   "--master_addr=127.0.0.1", f"--master_port={free_port()}", str(HERE / "straggler_job.py"),
                   mode, str(SLOW_RANK)]
            res = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
            assert res.returncode == 0, res.stderr[-3000:]
            assert len(list((out / "captures").glob("*_mlprof"))) == 4
            made[mode] = out / "captures"
        return made[mode]

    return get


# mode -> (cause, what names where it happens: (SlowRank field, text it holds) or None)
CASES = {
    "gc": ("gc", ("call_site", "straggler_job.py")),
    "data": ("data_loading", ("call_site", "__getitem__")),
    "forward": ("forward", ("module", "mixer")),
    "busy": ("cpu_contention", None),
}


@pytest.mark.parametrize("mode", list(CASES))
def test_the_slow_rank_and_its_cause(straggler, mode):
    report = cluster(straggler(mode), workers=1, thresholds=THRESHOLDS)
    assert [r.rank for r in report.ranks] == [0, 1, 2, 3] and not report.failed
    assert report.slow_ranks, f"{mode}: no slow rank"
    top = report.slow_ranks[0]
    cause, where = CASES[mode]
    assert (top.rank, top.cause) == (SLOW_RANK, cause), [(s.rank, s.excess_in, s.cause, s.components)
                                                         for s in report.slow_ranks]
    assert {s.rank for s in report.slow_ranks} == {SLOW_RANK}
    # The cause is most of the others' wait, and of the slow rank's own excess.
    assert top.cause_ns > 0.4 * top.excess_ns and top.cause_share_of_wait > 0.3
    if where:
        field, text = where
        assert text in (getattr(top, field) or ""), top
    # Arrival order: the slow rank is the one the others wait for, in most instances of some collective.
    late = [a for a in report.arrivals if a["rank"] == SLOW_RANK and a["last_share"] >= 0.5]
    assert late, report.arrivals


def test_a_balanced_job_names_no_rank(straggler):
    report = cluster(straggler("none"), workers=1, thresholds=THRESHOLDS)
    assert len(report.ranks) == 4
    assert report.slow_ranks == [], [(s.rank, s.excess_in, s.share_of_step, s.cause) for s in report.slow_ranks]


def test_cluster_cli_says_the_cause(straggler):
    path = straggler("gc")
    res = subprocess.run([sys.executable, "-m", "mlprof", "cluster", str(path), "--json", "--workers", "1"],
                         capture_output=True, text=True, timeout=240)
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    slow = data["slow_ranks"][0]
    assert (slow["rank"], slow["excess_in"], slow["cause"]) == (SLOW_RANK, "compute", "gc")
    assert slow["components"][0]["cause"] == "gc"
    assert {row["rank"] for row in data["skew_rows"]} == {0, 1, 2, 3}
    assert {a["kind"] for a in data["arrivals"]} >= {"allreduce"}
    text = subprocess.run([sys.executable, "-m", "mlprof", "cluster", str(path), "--workers", "1"],
                          capture_output=True, text=True, timeout=240)
    assert f"rank {SLOW_RANK}: compute" in text.stdout
    assert "cause: garbage collection +" in text.stdout and "of the others' wait" in text.stdout
    assert "Arrival order per collective" in text.stdout
