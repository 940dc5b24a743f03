"""dominant_op on a composite op: one call whose time, with its backward, leads the step while no op inside
it does (torch.cdist over a large bank is mm, div, fill_ and eq forward and backward)."""

from __future__ import annotations

from mlprof.analysis.advisor import advise

from test_rules_golden import X, _store


def _cdist_steps(n_steps: int, composite: str):
    events, t = [], 0
    for i in range(n_steps):
        dur = 10_000
        events.append(X(f"ProfilerStep#{i + 1}", t, dur, cat="user_annotation"))
        # A 600 us linear, then the composite call (3 ms of four inner ops), then its backward node (3 ms of
        # three inner ops) linked by sequence number.
        events.append(X("aten::linear", t + 10, 600, **{"Sequence number": 1000 * i + 1, "Fwd thread id": 0}))
        events.append(X(composite, t + 700, 3_000))
        for k, name in enumerate(("aten::mm", "aten::div", "aten::fill_", "aten::eq")):
            seq = {"Sequence number": 1000 * i + 2, "Fwd thread id": 0} if k == 0 else {}
            events.append(X(name, t + 710 + 740 * k, 700, **seq))
        node = "autograd::engine::evaluate_function: EuclideanDistBackward0"
        events.append(X(node, t + 4_000, 3_000, tid=12, **{"Sequence number": 1000 * i + 2, "Fwd thread id": 1}))
        for k, name in enumerate(("aten::div", "aten::masked_fill_", "aten::sum")):
            events.append(X(name, t + 4_010 + 990 * k, 950, tid=12))
        t += dur
    return events


def test_a_call_whose_time_is_spread_over_its_inner_ops_is_named_with_its_backward(tmp_path):
    with _store(tmp_path, _cdist_steps(6, "aten::cdist"), "cdist") as store:
        findings = [f for f in advise(store).findings if f.id == "dominant_op"]
    top = findings[0]
    m = top.evidence.metrics
    assert m["op"] == "aten::cdist" and m["composite"] and top.severity in ("critical", "warning"), top.title
    assert m["backward_ns"] > 0 and "EuclideanDistBackward0" in top.title
    assert top.share >= 0.5


def test_a_standard_layer_leading_the_step_the_same_way_is_an_info_line(tmp_path):
    with _store(tmp_path, _cdist_steps(6, "aten::lstm"), "lstm") as store:
        findings = [f for f in advise(store).findings if f.id == "dominant_op"]
    assert findings and all(f.severity == "info" for f in findings), [(f.severity, f.title) for f in findings]
