"""op_analyse: calls of one op grouped by input shape, with the right counts and times."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from mlprof.outputs import single_output
from mlprof.workflow import op_analyse
from mlprof.analysis.ops import op_statistic
from mlprof.tables.store import TableStore

pytestmark = pytest.mark.torch


@pytest.fixture(scope="module")
def shaped_trace(tmp_path_factory):
    """A plain torch.profiler trace where relu runs on two known shapes a known number of times."""
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile, schedule

    path = tmp_path_factory.mktemp("shapes") / "run.pt.trace.json"
    a, b = torch.randn(8, 16), torch.randn(4, 4)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True,
                 schedule=schedule(wait=0, warmup=1, active=3, repeat=1),
                 on_trace_ready=lambda p: p.export_chrome_trace(str(path))) as prof:
        for _ in range(4):
            for _ in range(2):
                torch.relu(a)
            for _ in range(5):
                torch.relu(b)
            prof.step()
    return path


def test_groups_by_input_shape_with_counts_and_times(shaped_trace):
    result = op_analyse(shaped_trace, ["aten::relu"])
    groups = {json.dumps(g["input_shape"]): g for g in result["aten::relu"]}
    assert set(groups) == {"[[8, 16]]", "[[4, 4]]"}
    assert groups["[[8, 16]]"]["occurrences"] == 2 * 3 and groups["[[4, 4]]"]["occurrences"] == 5 * 3
    for g in groups.values():
        assert g["input_type"] == ["float"]
        assert g["host_avg_ns"] == pytest.approx(g["host_total_ns"] / g["occurrences"])
        assert g["host_self_ns"] <= g["host_total_ns"] and g["device_total_ns"] == 0
    # Shape groups add up to the op's figures in the op statistic.
    with TableStore(single_output(shaped_trace).tables_dir) as store:
        (stat,) = [r for r in op_statistic(store) if r["name"] == "aten::relu"]
    assert sum(g["occurrences"] for g in groups.values()) == stat["count"]
    assert sum(g["host_total_ns"] for g in groups.values()) == stat["host_total_ns"]


def test_short_and_unknown_names(shaped_trace):
    result = op_analyse(shaped_trace, ["RELU", "no_such_op"])
    assert {g["name"] for g in result["RELU"]} == {"aten::relu"}
    assert result["no_such_op"] == []


def test_op_cli_json_and_table(shaped_trace):
    res = subprocess.run([sys.executable, "-m", "mlprof", "op", str(shaped_trace), "--name", "aten::relu", "--json"],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert sum(g["occurrences"] for g in json.loads(res.stdout)["aten::relu"]) == 21
    text = subprocess.run([sys.executable, "-m", "mlprof", "op", str(shaped_trace), "--name", "relu"],
                          capture_output=True, text=True, timeout=120)
    assert "[[8, 16]]" in text.stdout and "[[4, 4]]" in text.stdout
