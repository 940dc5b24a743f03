"""compare as a measuring instrument on real runs (benchmarks/compare_verdicts.py, with fewer steps): no
change and a real 2x change on a quiet machine, and the 2x change on a busy one."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import compare_verdicts  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def rows(tmp_path_factory):
    return compare_verdicts.run_all(tmp_path_factory.mktemp("verdicts"), steps=12)


# Same code on a busy machine is not here: on this 2-vCPU host the busy loops slow the job without taking
# its CPU share (shared core resources), and two runs of the same code came out from -40% to +14% apart
# in some runs (docs/cli.md, issue 11's note). What holds every time is below.
@pytest.mark.parametrize("condition, pair", [("quiet", "no change"), ("quiet", "2x work"), ("busy", "2x work")])
def test_verdict_holds_on_a_quiet_and_a_busy_machine(rows, condition, pair):
    (row,) = [r for r in rows if r["condition"] == condition and r["pair"] == pair]
    assert row["verdict"] == row["expected"], row["sentence"]
    if pair == "2x work":
        assert row["change_pct"] > 10, row["sentence"]  # twice the passes: clearly slower
