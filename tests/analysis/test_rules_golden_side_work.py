"""Golden tests: side_work names the user's function that does work besides training in every step (a
``copy.deepcopy(model)`` for an EMA, metrics in a Python loop), in Python and in the ops it runs, and stays
quiet when the step is only its core, when the work is nearly all ops (the op rules' finding) and when
host_outside_ops already names the same line."""

from __future__ import annotations

from mlprof.analysis.advisor import advise
from mlprof.parse import ParseOptions, parse_path
from mlprof.tables.store import TableStore

from parse.conftest import BASE_NS, make_capture
from test_rules_golden import X

US = 1_000
SAMPLE_US = 100
TRAIN = "/home/u/train.py"
COPY = "/usr/lib/python3.11/copy.py"
TORCH = "/venv/lib/python3.11/site-packages/torch"
FRAMES = [[TRAIN, 40, "main"],                                   # 0
          [TRAIN, 14, "train_step"],                             # 1: the model's forward and backward
          [f"{TORCH}/nn/modules/module.py", 1750, "_call_impl"],   # 2
          [f"{TORCH}/autograd/__init__.py", 353, "backward"],    # 3
          [TRAIN, 12, "snapshot"],                               # 4: ema = copy.deepcopy(model)
          [COPY, 128, "deepcopy"],                               # 5
          [f"{TORCH}/_tensor.py", 110, "__deepcopy__"],          # 6
          [TRAIN, 20, "log_metrics"],                            # 7: a Python loop over the batch
          [TRAIN, 21, "log_metrics"], [TRAIN, 22, "log_metrics"]]  # 8, 9: its other lines
FORWARD, BACKWARD, DEEPCOPY, DEEPCOPY_OP, METRICS = 0, 1, 2, 3, 4
METRICS_LINES = (4, 5, 6)  # the metrics function's samples spread over three of its lines
STACKS = [[0, 1, 2], [0, 1, 3], [0, 4, 5], [0, 4, 5, 6], [0, 7], [0, 8], [0, 9]]


def _advise(tmp_path, side_python_us: int, side_ops_us: int, side_stack: int = DEEPCOPY,
            side_op: str = "aten::clone", steps: int = 6):
    """Steps of 10 ms: 4 ms of forward (nn.Module), then the side work (``side_ops_us`` of ``side_op``
    calls, then ``side_python_us`` of Python with no op), then backward, to the step's end. The stack
    sampler takes one sample every 100 us, on the stack of whatever runs."""
    events, samples = [], []

    def sample(start_us: int, end_us: int, stack) -> None:
        stacks = stack if isinstance(stack, tuple) else (stack,)
        samples.extend([BASE_NS + t * US, stacks[i % len(stacks)]]
                       for i, t in enumerate(range(start_us + 50, end_us, SAMPLE_US)))

    for k in range(steps):
        t0 = k * 10_000
        events += [X(f"ProfilerStep#{k + 1}", t0, 10_000, cat="user_annotation"),
                   X("nn.Module: Linear_0", t0, 4_000, cat="python_function"), X("aten::linear", t0 + 10, 3_900)]
        sample(t0, t0 + 4_000, FORWARD)
        t = t0 + 4_000
        for n in range(0, side_ops_us, 500):  # ops of 500 us, one after the other
            events.append(X(side_op, t + n, min(500, side_ops_us - n)))
        sample(t, t + side_ops_us, DEEPCOPY_OP if side_stack == DEEPCOPY else side_stack)
        t += side_ops_us
        sample(t, t + side_python_us, side_stack)
        t += side_python_us
        events += [X("autograd::engine::evaluate_function: AddmmBackward0", t, t0 + 10_000 - t - 10),
                   X("aten::mm", t + 5, t0 + 10_000 - t - 30)]
        sample(t, t0 + 10_000, BACKWARD)
    capture = make_capture(tmp_path / "cap", {0: {"events": events, "python_samples": {
        "interval_ns": SAMPLE_US * US, "tid": 11, "frames": FRAMES, "stacks": STACKS, "samples": samples}}})
    with TableStore(parse_path(capture, ParseOptions())[0].tables_dir) as store:
        return {f.id: f for f in advise(store).findings}


def test_a_deepcopy_per_step_is_named_with_its_line_library_call_and_split(tmp_path):
    # 2 ms of deepcopy's Python, 2 ms of the clones it runs: 40% of a 10 ms step, half of it in Python
    # (below host_outside_ops' 40%, so only side_work sees all of it).
    f = _advise(tmp_path, side_python_us=2_000, side_ops_us=2_000)["side_work"]
    assert f.severity == "critical" and 0.36 <= f.share <= 0.44
    assert "of step time is snapshot (train.py:12 in copy.deepcopy), outside the model's" in f.title
    assert "(20% of the step in Python, 20% in the ops it runs)" in f.title
    assert f.evidence.call_sites[0]["library_call"] == "copy.deepcopy"
    m = f.evidence.metrics
    assert m["function"] == "snapshot" and m["samples"] == 6 * 40
    # Each sample is worth its phase's time over its phase's samples: the estimate is the direct sum.
    assert abs(m["python_ns"] - 6 * 2_000 * US) <= 6 * SAMPLE_US * US
    assert abs(m["ops_ns"] - 6 * 2_000 * US) <= 6 * SAMPLE_US * US


def test_metrics_in_a_python_loop_are_a_cousin_named_without_a_library_call(tmp_path):
    # Another shape: a metrics loop that is mostly Python, with a few small ops (.item() calls).
    f = _advise(tmp_path, side_python_us=2_000, side_ops_us=500, side_stack=METRICS, side_op="aten::item")
    f = f["side_work"]
    assert f.severity == "warning" and 0.22 <= f.share <= 0.28
    assert "of step time is log_metrics (train.py:20), outside" in f.title
    assert f.evidence.call_sites[0]["library_call"] is None


def test_a_step_that_is_only_its_core_has_no_side_work(tmp_path):
    found = _advise(tmp_path, side_python_us=0, side_ops_us=0)
    assert "side_work" not in found


def test_side_work_that_is_nearly_all_ops_is_left_to_the_op_rules(tmp_path):
    # 4 ms of ops called from the line, 0.3 ms of Python: under a third Python, an op rule's finding.
    assert "side_work" not in _advise(tmp_path, side_python_us=300, side_ops_us=4_000)


def test_side_work_is_silent_where_host_outside_ops_names_the_same_line(tmp_path):
    # 5 ms of deepcopy's Python: host_outside_ops (50%) names train.py:12 itself; one finding, not two.
    found = _advise(tmp_path, side_python_us=5_000, side_ops_us=500)
    assert "side_work" not in found
    assert "train.py:12 snapshot in copy.deepcopy" in found["host_outside_ops"].title


def test_side_work_names_the_function_where_host_outside_ops_finds_no_line(tmp_path):
    # 5 ms of a metrics loop's Python spread over three of its lines: host_outside_ops (50%) finds no line
    # with half of its samples and says so; the function holds them all, and side_work names it.
    found = _advise(tmp_path, side_python_us=5_000, side_ops_us=0, side_stack=METRICS_LINES)
    assert "no line holds half" in found["host_outside_ops"].title
    f = found["side_work"]
    assert "of step time is log_metrics (train.py:2" in f.title, f.title
    # One cause seen twice: side_work, which names it, leads; host_outside_ops says where to look.
    assert f.severity == "critical" and found["host_outside_ops"].severity == "info"
    assert "side_work names the function they are in (log_metrics)" in found["host_outside_ops"].title


def test_side_work_below_its_share_is_not_reported(tmp_path):
    # 1 ms in all (10%), under side_work's 20%: the step's own work is what to look at.
    assert "side_work" not in _advise(tmp_path, side_python_us=500, side_ops_us=500)


def test_side_work_in_steps_shorter_than_the_sampling_interval_keeps_its_share(tmp_path):
    # 200 steps of 5 ms (1.5 ms forward, 1.5 ms of a metrics loop's Python, 2 ms backward), sampled every
    # 7.3 ms on one clock: about two steps in three hold a sample. The samples estimate the steps they fall
    # in; the share holds for every step: 30%, where it read 30% x 2/3 = 20% before.
    events, samples = [], []
    segments = []
    for k in range(200):
        t0 = k * 5_000
        events += [X(f"ProfilerStep#{k + 1}", t0, 5_000, cat="user_annotation"),
                   X("nn.Module: Linear_0", t0, 1_500, cat="python_function"), X("aten::linear", t0 + 10, 1_480),
                   X("autograd::engine::evaluate_function: AddmmBackward0", t0 + 3_000, 1_990),
                   X("aten::mm", t0 + 3_005, 1_970)]
        segments += [(t0, t0 + 1_500, FORWARD), (t0 + 1_500, t0 + 3_000, METRICS), (t0 + 3_000, t0 + 5_000, BACKWARD)]
    t, i = 50, 0
    while t < 200 * 5_000:
        while segments[i][1] <= t:
            i += 1
        samples.append([BASE_NS + t * US, segments[i][2]])
        t += 7_300
    capture = make_capture(tmp_path / "cap", {0: {"events": events, "python_samples": {
        "interval_ns": 7_300 * US, "tid": 11, "frames": FRAMES, "stacks": STACKS, "samples": samples}}})
    with TableStore(parse_path(capture, ParseOptions())[0].tables_dir) as store:
        found = {f.id: f for f in advise(store).findings}
    f = found["side_work"]
    assert 0.26 <= f.share <= 0.34, f.title
    assert abs(f.impact_ns - 0.3 * 200 * 5_000 * US) <= 0.04 * 200 * 5_000 * US
