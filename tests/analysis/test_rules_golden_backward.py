"""Golden tests: the rules that charge time in ops count a loop's backward with the loop (backward_links)."""

from __future__ import annotations

import pytest

from mlprof.analysis.advisor import advise

from test_rules_golden import X, _store

NODE = "autograd::engine::evaluate_function: "
STEP_US = 12_000


def _loop_steps(n_steps=5, backward_us=140, backward_tid=11):
    """Steps of 12 ms: a Python loop of 64 tiny linears (10 us each, 2 us apart), then their 64 backward
    nodes, each a matmul of ``backward_us`` (not tiny: as on two intra-op threads) and a gradient add_."""
    events, seq = [], 1000
    for k in range(n_steps):
        t0 = k * STEP_US
        events.append(X(f"ProfilerStep#{k + 1}", t0, STEP_US, cat="user_annotation"))
        first = seq
        for i in range(64):
            events.append(X("aten::linear", t0 + 10 + 12 * i, 10, **{"Sequence number": seq, "Fwd thread id": 0}))
            seq += 1
        t = t0 + 1_000
        for i in reversed(range(64)):
            node = {"Sequence number": first + i, "Fwd thread id": 1}
            events.append(X(NODE + "LinearBackward0", t, backward_us + 20, tid=backward_tid, **node))
            events.append(X("aten::mm", t + 5, backward_us, tid=backward_tid))
            events.append(X("aten::add_", t + backward_us + 8, 10, tid=backward_tid))
            t += backward_us + 25
    return events


def test_the_loops_backward_is_the_loops_cost_and_a_backward_op_names_its_forward_op(tmp_path):
    with _store(tmp_path, _loop_steps(), "loop") as store:
        findings = advise(store).findings
    storm = next(f for f in findings if f.id == "op_storm")
    # Forward: 64 x 10 us of ops + 63 x 2 us of loop; backward: 64 nodes of 160 us + 63 gaps of 5 us.
    forward_us, backward_us = 64 * 10 + 63 * 2, 64 * 160 + 63 * 5
    assert storm.evidence.metrics["backward_ns"] == 5 * backward_us * 1000
    assert storm.share == pytest.approx((forward_us + backward_us) / STEP_US, abs=1e-3)
    assert storm.severity == "critical"
    top = min(findings, key=lambda f: ({"critical": 0, "warning": 1, "info": 2}[f.severity], -f.share))
    assert top.id == "op_storm"
    # aten::mm leads the ops, but it is the loop's backward: named by its forward op, an info line.
    mm = next(f for f in findings if f.id == "dominant_op" and f.evidence.metrics["op"] == "aten::mm")
    assert "in the backward of aten::linear" in mm.title and mm.severity == "info"
    assert mm.evidence.metrics["backward_share"] == 1 and mm.evidence.metrics["loop_backward_share"] == 1
    assert "op_storm" in mm.fix


def test_a_loops_backward_on_another_thread_is_still_the_loops(tmp_path):
    with _store(tmp_path, _loop_steps(backward_tid=12), "thread") as store:
        storm = next(f for f in advise(store).findings if f.id == "op_storm")
    assert storm.evidence.metrics["backward_ns"] == 5 * (64 * 160 + 63 * 5) * 1000 and storm.severity == "critical"


def test_a_single_expensive_backward_op_names_its_forward_op_as_a_warning(tmp_path):
    """No loop: one hand-written op whose backward is slow is dominant_op's, named by its forward op."""
    events = []
    for k in range(5):
        t0 = k * 1_000
        events += [X(f"ProfilerStep#{k + 1}", t0, 1_000, cat="user_annotation"),
                   X("aten::mm", t0 + 10, 100, **{"Sequence number": 50 + 2 * k, "Fwd thread id": 0}),
                   X("aten::cumprod", t0 + 120, 30, **{"Sequence number": 51 + 2 * k, "Fwd thread id": 0}),
                   X(NODE + "CumprodBackward0", t0 + 200, 700, **{"Sequence number": 51 + 2 * k, "Fwd thread id": 1}),
                   X("aten::cumprod_backward", t0 + 205, 690)]
    with _store(tmp_path, events, "single") as store:
        findings = advise(store).findings
    f = next(f for f in findings if f.id == "dominant_op")
    assert f.evidence.metrics["op"] == "aten::cumprod_backward"
    assert "in the backward of aten::cumprod" in f.title and f.severity == "critical"
    assert f.evidence.metrics["loop_backward_share"] == 0
    assert "op_storm" not in {g.id for g in findings if g.severity in ("critical", "warning")}


def test_a_modules_backward_counts_with_the_module(tmp_path):
    """with_stack's nn.Module frames: the module whose forward created a node owns the node's time."""
    events = []
    for k in range(5):
        t0 = k * 1_000
        seq = {"Sequence number": 70 + k, "Fwd thread id": 0}
        events += [X(f"ProfilerStep#{k + 1}", t0, 1_000, cat="user_annotation"),
                   X("nn.Module: Scaler_0", t0 + 10, 100, cat="python_function"),
                   X("aten::mul", t0 + 15, 90, **seq),
                   X(NODE + "MulBackward0", t0 + 200, 600, tid=12, **{**seq, "Fwd thread id": 1}),
                   X("aten::mul", t0 + 205, 590, tid=12),
                   X("aten::mm", t0 + 850, 100)]
    with _store(tmp_path, events, "module") as store:
        f = next(f for f in advise(store).findings if f.id == "dominant_module")
    # 90 us of forward, 600 us of backward (the node's 10 us of self time and its mul's 590) of every 1000.
    assert f.evidence.metrics["module"] == "nn.Module: Scaler_0" and f.share == pytest.approx(0.69)
    assert f.severity == "critical"


def test_the_loop_line_is_the_one_calling_the_repeated_module_even_inside_a_forward():
    from mlprof.analysis.advisor.loops import module_caller as _module_caller

    lib = "/venv/lib/python3.11/site-packages/torch/nn/modules/module.py"
    frames = ["train.py:80 main", f"{lib}:1778 _wrapped_call_impl", f"{lib}:1884 _call_impl",
              "model.py:30 forward",  # the loop, in an outer model's forward
              f"{lib}:1778 _wrapped_call_impl", f"{lib}:1884 _call_impl", "model.py:12 forward",  # the inner model
              f"{lib}:1778 _wrapped_call_impl", f"{lib}:1884 _call_impl", "/venv/torch/nn/modules/conv.py:565 forward"]
    user = {"train.py:80 main", "model.py:30 forward", "model.py:12 forward"}
    # The outer model (depth 0) is called from main; the inner one, called 64 times (depth 1), from line 30.
    assert _module_caller(frames, user, 0) == "train.py:80 main"
    assert _module_caller(frames, user, 1) == "model.py:30 forward"
    assert _module_caller(frames, user, 2) == "model.py:12 forward"
    assert _module_caller(frames, user, 3) is None
