"""Golden tests: Python between ops named by its line and the library call it made, or said unexplained."""

from __future__ import annotations

from mlprof.analysis.advisor import advise
from mlprof.parse import ParseOptions, parse_path
from mlprof.tables.store import TableStore

from parse.conftest import BASE_NS, make_capture
from test_rules_golden import X

US = 1_000
COPY = "/usr/lib/python3.11/copy.py"
FRAMES = [["/home/u/train.py", 40, "main"], ["/home/u/train.py", 12, "snapshot"], [COPY, 128, "deepcopy"],
          [COPY, 146, "_deepcopy_dict"], ["/home/u/train.py", 20, "log"], ["/home/u/train.py", 30, "report"]]
STACKS = [[0, 1, 2, 3], [0, 4], [0, 5]]  # deepcopy from line 12; plain Python at lines 20 and 30


def _outside_ops(tmp_path, samples_per_step, stack_of, sampled_steps=5):
    """5 steps of 1 ms: a 100 us op, then 900 us of Python; ``samples_per_step`` samples in the Python of
    the first ``sampled_steps`` steps."""
    events, samples = [], []
    for k in range(5):
        t0 = k * 1_000
        events += [X(f"ProfilerStep#{k + 1}", t0, 1_000, cat="user_annotation"), X("aten::mm", t0 + 10, 100)]
        samples += [[BASE_NS + (t0 + 200 + 150 * i) * US, stack_of(k, i)]
                    for i in range(samples_per_step if k < sampled_steps else 0)]
    capture = make_capture(tmp_path / "cap", {0: {"events": events, "python_samples": {
        "interval_ns": 150 * US, "tid": 11, "frames": FRAMES, "stacks": STACKS, "samples": samples}}})
    with TableStore(parse_path(capture, ParseOptions())[0].tables_dir) as store:
        return next(f for f in advise(store).findings if f.id == "host_outside_ops")


def test_python_between_ops_is_named_by_its_line_and_the_library_call_there(tmp_path):
    f = _outside_ops(tmp_path, 4, lambda k, i: 0 if i < 3 else 1)  # 15 of 20 samples in deepcopy
    assert f.title.endswith("mostly at train.py:12 snapshot in copy.deepcopy")
    assert f.evidence.call_sites[0]["library_call"] == "copy.deepcopy" and f.evidence.metrics["unexplained"] is None


def test_a_library_call_is_named_by_its_module():
    from mlprof.analysis.advisor.rules_host import _dotted

    venv = "/work/.venv/lib/python3.11/site-packages"
    assert _dotted(f"{venv}/torch/serialization.py:966 save") == "torch.serialization.save"
    assert _dotted("/usr/lib/python3.11/copy.py:128 deepcopy") == "copy.deepcopy"
    assert _dotted(f"{venv}/tokenizers/__init__.py:10 encode") == "tokenizers.encode"


def test_plain_python_at_a_line_has_no_library_call(tmp_path):
    f = _outside_ops(tmp_path, 4, lambda k, i: 1)
    assert f.title.endswith("mostly at train.py:20 log")


def test_few_samples_or_no_leading_line_is_said_unexplained_or_uncertain(tmp_path):
    # Few samples on the line: named, and marked uncertain as every rule's sites are (evidence_strength.py).
    few = _outside_ops(tmp_path / "three", 1, lambda k, i: 0, sampled_steps=3)
    assert "mostly at train.py:12 snapshot in copy.deepcopy (3 samples: call site uncertain)" in few.title
    split = _outside_ops(tmp_path / "split", 3, lambda k, i: i)
    assert "unexplained: no line holds half of its 15 samples (the most, train.py:" in split.title
    assert "mostly at" not in split.title and split.evidence.metrics["unexplained"].startswith("no line holds half")


def test_without_samples_the_python_time_is_unexplained_for_that_reason(tmp_path):
    events = []
    for k in range(5):
        t0 = k * 1_000
        events += [X(f"ProfilerStep#{k + 1}", t0, 1_000, cat="user_annotation"), X("aten::mm", t0 + 10, 100)]
    capture = make_capture(tmp_path / "cap", {0: {"events": events}})
    with TableStore(parse_path(capture, ParseOptions())[0].tables_dir) as store:
        f = next(f for f in advise(store).findings if f.id == "host_outside_ops")
    assert "unexplained: no Python stack samples" in f.title


def test_samples_that_all_fall_outside_the_python_time_are_said_so(tmp_path):
    # 5 samples, all inside the op (on a busy machine, the sampler leaves out the samples after a wait).
    events, samples = [], []
    for k in range(5):
        t0 = k * 1_000
        events += [X(f"ProfilerStep#{k + 1}", t0, 1_000, cat="user_annotation"), X("aten::mm", t0 + 10, 100)]
        samples.append([BASE_NS + (t0 + 50) * US, 1])
    capture = make_capture(tmp_path / "cap", {0: {"events": events, "python_samples": {
        "interval_ns": 150 * US, "tid": 11, "frames": FRAMES, "stacks": STACKS, "samples": samples}}})
    with TableStore(parse_path(capture, ParseOptions())[0].tables_dir) as store:
        f = next(f for f in advise(store).findings if f.id == "host_outside_ops")
    assert "unexplained: none of the steps' 5 Python stack samples fell in it" in f.title
