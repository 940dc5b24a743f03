"""Real CPU training runs: numbers agree with torch's own key_averages()."""

from __future__ import annotations

import pytest

from mlprof.analysis import op_statistic, step_breakdown
from mlprof.parse import ParseOptions, parse_path
from mlprof.tables.store import TableStore

pytestmark = pytest.mark.torch


def _train(prof_steps: int, on_step):
    torch = pytest.importorskip("torch")
    from torch import nn

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 8))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    data = torch.utils.data.TensorDataset(torch.randn(256, 32), torch.randn(256, 8))
    loader = torch.utils.data.DataLoader(data, batch_size=16)
    done = 0
    for x, y in loader:
        opt.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        opt.step()
        on_step()
        done += 1
        if done >= prof_steps:
            break


def test_self_time_per_op_matches_torch_key_averages(tmp_path):
    pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile, schedule

    trace = tmp_path / "run.pt.trace.json"
    averages = {}

    def ready(prof):
        prof.export_chrome_trace(str(trace))
        averages.update({e.key: (e.count, e.self_cpu_time_total) for e in prof.key_averages()})

    with profile(activities=[ProfilerActivity.CPU], record_shapes=True,
                 schedule=schedule(wait=0, warmup=1, active=6, repeat=1), on_trace_ready=ready) as prof:
        _train(8, prof.step)
    store = TableStore(parse_path(trace, ParseOptions(output_dir=tmp_path / "out"))[0].tables_dir)
    ours: dict[str, tuple[int, float]] = {}
    for r in op_statistic(store):
        # key_averages() folds every ProfilerStep#N into one "ProfilerStep*" row.
        name = "ProfilerStep*" if r["name"].startswith("ProfilerStep#") else r["name"]
        count, self_us = ours.get(name, (0, 0.0))
        ours[name] = (count + r["count"], self_us + r["host_self_ns"] / 1000)
    compared = 0
    for name, (count, self_us) in averages.items():
        if self_us < 50:  # µs rounding dominates below this
            continue
        assert name in ours, name
        assert ours[name][0] == count, name
        assert ours[name][1] == pytest.approx(self_us, rel=0.01), name
        compared += 1
    assert compared >= 10
    steps = step_breakdown(store)
    assert len(steps) == 6
    for s in steps:
        assert s.forward_ns > 0 and s.backward_ns > 0 and s.optimizer_ns > 0 and s.data_loading_ns > 0
        assert s.data_loading_ns + s.forward_ns + s.backward_ns + s.optimizer_ns + s.host_communication_ns \
            + s.gc_ns + s.python_ns + s.other_ns == s.dur_ns


def test_mlprof_capture_from_a_real_run_parses(tmp_path):
    pytest.importorskip("torch")
    import mlprof

    out = tmp_path / "result"
    with mlprof.profile(activities=[mlprof.ProfilerActivity.CPU],
                        schedule=mlprof.schedule(wait=0, warmup=1, active=2, repeat=2),
                        on_trace_ready=mlprof.tensorboard_trace_handler(str(out), analyse_flag=False)) as prof:
        _train(7, prof.step)
    captures = [p for p in out.iterdir() if p.name.endswith("_mlprof")]
    assert len(captures) == 1
    result = parse_path(captures[0])[0]
    assert result.windows == [0, 1]
    with TableStore(result.tables_dir) as store:
        steps = store.rows("SELECT window_index, step FROM steps ORDER BY 1, 2")
        assert [w for w, _ in steps] == [0, 0, 1, 1]
        assert store.count("host_ops") > 0
