"""compare as a measuring instrument on real runs: the same verdict on a quiet and on a busy machine,
for a real 2x change and for no change (benchmarks/compare_verdicts.py, with fewer steps)."""

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


@pytest.mark.parametrize("condition", ["quiet", "busy"])
@pytest.mark.parametrize("pair", ["no change", "2x work"])
def test_verdict_holds_on_a_quiet_and_a_busy_machine(rows, condition, pair):
    (row,) = [r for r in rows if r["condition"] == condition and r["pair"] == pair]
    assert row["verdict"] == row["expected"], row["sentence"]
    if pair == "2x work":
        assert row["change_pct"] > 50, row["sentence"]  # twice the passes: clearly slower
