"""Golden tests: step_outliers names the work its slow steps run (a checkpoint every 5th step, an evaluation
every 4th) from the stack samples, and leads over side_work's finding about the same line; slow steps with no
line of their own are left unnamed."""

from __future__ import annotations

from mlprof.analysis.advisor import advise
from mlprof.parse import ParseOptions, parse_path
from mlprof.tables.store import TableStore

from parse.conftest import BASE_NS, make_capture
from test_rules_golden import X

US = 1_000
SAMPLE_US = 100
TRAIN = "/home/u/train.py"
TORCH = "/venv/lib/python3.11/site-packages/torch"
FRAMES = [[TRAIN, 40, "main"],                                   # 0
          [TRAIN, 14, "train_step"],                             # 1
          [f"{TORCH}/nn/modules/module.py", 1750, "_call_impl"],   # 2
          [f"{TORCH}/autograd/__init__.py", 353, "backward"],    # 3
          [TRAIN, 30, "checkpoint"],                             # 4: torch.save(model.state_dict(), path)
          [f"{TORCH}/serialization.py", 650, "save"],            # 5
          [TRAIN, 52, "evaluate"]]                               # 6: a held-out batch through the model
FORWARD, BACKWARD, SAVE, EVAL = 0, 1, 2, 3
STACKS = [[0, 1, 2], [0, 1, 3], [0, 4, 5], [0, 6, 2]]


def _advise(tmp_path, slow_steps: set[int], extra_us: int, extra_stack: int | None, steps: int = 20):
    """Steps of 10 ms (4 ms forward, 6 ms backward); the steps in ``slow_steps`` also run ``extra_us`` of
    work after the backward, sampled on ``extra_stack`` (None: not sampled).
    The sampler takes one sample every 100 us, on the stack of whatever runs."""
    events, samples = [], []

    def sample(start_us: int, end_us: int, stack: int) -> None:
        samples.extend([BASE_NS + t * US, stack] for t in range(start_us + 50, end_us, SAMPLE_US))

    t0 = 0
    for k in range(1, steps + 1):
        extra = extra_us if k in slow_steps else 0
        events += [X(f"ProfilerStep#{k}", t0, 10_000 + extra, cat="user_annotation"),
                   X("nn.Module: Linear_0", t0, 4_000, cat="python_function"), X("aten::linear", t0 + 10, 3_900),
                   X("autograd::engine::evaluate_function: AddmmBackward0", t0 + 4_000, 5_990),
                   X("aten::mm", t0 + 4_005, 5_970)]
        sample(t0, t0 + 4_000, FORWARD)
        sample(t0 + 4_000, t0 + 10_000, BACKWARD)
        if extra:
            if extra_stack == EVAL:
                events.append(X("aten::linear", t0 + 10_010, extra - 20))
            if extra_stack is not None:
                sample(t0 + 10_000, t0 + 10_000 + extra, extra_stack)
        t0 += 10_000 + extra
    capture = make_capture(tmp_path / "cap", {0: {"events": events, "python_samples": {
        "interval_ns": SAMPLE_US * US, "tid": 11, "frames": FRAMES, "stacks": STACKS, "samples": samples}}})
    with TableStore(parse_path(capture, ParseOptions())[0].tables_dir) as store:
        return {f.id: f for f in advise(store).findings}


def test_a_checkpoint_every_fifth_step_is_named_and_leads_over_side_work(tmp_path):
    # 25 ms of torch.save every 5th step: a third of all step time, every slow step's excess.
    found = _advise(tmp_path, {5, 10, 15, 20}, 25_000, SAVE)
    f = found["step_outliers"]
    assert f.severity in ("critical", "warning"), f.title
    assert "4 of 20 steps take over" in f.title and "every 5th step, running torch.serialization.save at train.py:30" in f.title, f.title
    assert f.evidence.metrics["every_nth_step"] == 5
    (site,) = f.evidence.call_sites
    assert site["call_site"].endswith("train.py:30 checkpoint") and site["samples"] == 4 * 250
    assert abs(site["self_ns"] - 4 * 25_000 * US) <= 4 * SAMPLE_US * US
    # side_work sees the same save as a share of all steps: it points at step_outliers, which leads.
    side = found.get("side_work")
    assert side is None or (side.severity == "info" and "see step_outliers" in side.title), side
    assert "train.py:30" in f.fix and "every 5th step" in f.fix


def test_an_evaluation_every_fourth_step_is_a_cousin(tmp_path):
    # Another shape: the slow steps run ops (a held-out forward) from another line, every 4th step.
    f = _advise(tmp_path, {4, 8, 12, 16, 20}, 15_000, EVAL)["step_outliers"]
    assert "every 4th step, running evaluate at train.py:52" in f.title, f.title
    assert f.evidence.call_sites[0]["call_site"].endswith("train.py:52 evaluate")


def test_slow_steps_without_samples_name_no_line(tmp_path):
    # No stack sample in the slow steps' excess (a sampler that was off, a C call it could not see): no line
    # is named for them, and irregular slow steps are not called periodic.
    f = _advise(tmp_path, {3, 7, 8, 15}, 25_000, None)["step_outliers"]
    assert f.evidence.call_sites == [] and "running" not in f.title, f.title
    assert f.evidence.metrics["every_nth_step"] is None


def test_periodic_work_leads_only_over_side_work_and_host_outside_ops():
    # A DataLoader whose slow batches make the slow steps: data_loading names the loader's line as
    # step_outliers does, and stays what it is (demoting it let an op storm inside the loader lead).
    from mlprof.analysis.advisor.leads import _periodic_work_leads
    from mlprof.analysis.advisor.model import Evidence, Finding

    site = {"call_site": "/home/u/data.py:60 _augment"}
    outliers = Finding(id="step_outliers", severity="warning", share=0.2, impact_ns=1, title="slow steps",
                       evidence=Evidence(call_sites=[site]), fix="")
    loading = Finding(id="data_loading", severity="critical", share=0.88, impact_ns=1, title="Input-bound",
                      evidence=Evidence(call_sites=[site]), fix="")
    side = Finding(id="side_work", severity="critical", share=0.3, impact_ns=1, title="side work",
                   evidence=Evidence(call_sites=[site]), fix="")
    out = {f.id: f for f in _periodic_work_leads([outliers, loading, side])}
    assert out["data_loading"].severity == "critical" and out["side_work"].severity == "info"
    assert out["step_outliers"].severity == "critical"


def test_an_op_storm_and_slow_steps_inside_data_loading_are_the_loaders():
    # loader_getitem: a Dataset whose __getitem__ runs tiny tensor ops, some batches slower. Beside
    # data_loading's warning, the op storm issued mostly in data loading and the slow steps that grew there
    # are the loader's work: info. A storm in the forward stays a warning.
    from mlprof.analysis.advisor.leads import _data_loading_owns
    from mlprof.analysis.advisor.model import Evidence, Finding

    def finding(rule, severity="warning", **evidence):
        return Finding(id=rule, severity=severity, share=0.5, impact_ns=1, title=rule, evidence=Evidence(**evidence),
                       fix="")

    loading = finding("data_loading", "critical")
    storm = finding("op_storm", metrics={"storm_ns_by_phase": {"data_loading": 720, "forward": 330}})
    forward_storm = finding("op_storm", metrics={"storm_ns_by_phase": {"data_loading": 100, "forward": 900}})
    slow = finding("step_outliers", steps=[{"grew_most": "data_loading"}] * 3 + [{"grew_most": "python"}])
    out = _data_loading_owns([loading, storm, forward_storm, slow])
    assert [f.severity for f in out] == ["critical", "info", "warning", "info"]
    assert "it is in data loading (see data_loading)" in out[1].title
    # Without a data_loading warning nothing changes.
    assert _data_loading_owns([storm, slow]) == [storm, slow]
