"""The module tree's per-step figures: one divisor (the steps with module calls) for the CLI and the dashboard."""

from __future__ import annotations

from mlprof.analysis.modules import module_steps, module_tree
from mlprof.parse import ParseOptions, parse_path
from mlprof.tables.store import TableStore
from mlprof.ui.datasets import DATASETS, Params

from parse.conftest import BASE_NS, make_capture

US = 1_000


def _store(tmp_path) -> TableStore:
    # Two steps of 100 us; Net (40 us) and Net.fc (15 us) called once in each, and a third step without modules.
    steps, calls = [], []
    for k in range(3):
        t0 = BASE_NS + k * 100 * US
        steps.append({"step": k + 1, "start_ns": t0, "end_ns": t0 + 100 * US})
        if k < 2:
            calls += [[0, t0 + 10 * US, t0 + 50 * US, 42], [1, t0 + 15 * US, t0 + 30 * US, 42]]
    capture = make_capture(tmp_path / "cap", {0: {"steps": steps, "modules": {
        "modules": [["Net", "Net"], ["Net.fc", "Linear"]], "calls": calls}}})
    return TableStore(parse_path(capture, ParseOptions())[0].tables_dir)


def test_the_per_step_divisor_is_the_steps_with_module_calls(tmp_path):
    with _store(tmp_path) as store:
        assert module_steps(store) == 2 and module_steps(store, step=1) == 1
        tree = {m.path: m for m in module_tree(store)}
        assert tree["Net"].total_ns // module_steps(store) == 40 * US
        assert tree["Net.fc"].calls / module_steps(store) == 1


def test_the_dashboards_module_rows_carry_the_same_divisor(tmp_path):
    with _store(tmp_path) as store:
        dataset = DATASETS["modules"]
        rows = dataset.fn(store, Params())
        assert {r["steps"] for r in rows} == {2}
        assert {r["steps"] for r in dataset.fn(store, Params(step=2))} == {1}
