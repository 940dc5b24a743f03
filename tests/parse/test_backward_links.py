"""Golden tests of the backward_links table: each backward op linked to the forward op that created its node."""

from __future__ import annotations

import json
from pathlib import Path

from mlprof.parse.pipeline import ParseOptions, parse_path
from mlprof.tables.store import TableStore
from trace_events import BASE_NS, X

NODE = "autograd::engine::evaluate_function: "


def _store(tmp_path: Path, events: list[dict]) -> TableStore:
    path = tmp_path / "t.pt.trace.json"
    path.write_text(json.dumps({"schemaVersion": 1, "baseTimeNanoseconds": BASE_NS, "traceEvents": events}))
    return TableStore(parse_path(path, ParseOptions(output_dir=tmp_path / "out"))[0].tables_dir)


def _seq(n, fwd_thread=0):
    return {"Sequence number": n, "Fwd thread id": fwd_thread}


def _links(store):
    return {op: (node, fwd, tid) for op, node, fwd, tid in store.rows("""
        SELECT h.name, n.name, f.name, b.forward_tid FROM backward_links b JOIN host_ops h ON h.op_id = b.op_id
        JOIN host_ops n ON n.op_id = b.node_op_id LEFT JOIN host_ops f ON f.op_id = b.forward_op_id""")}


def test_backward_ops_link_to_the_forward_op_that_created_their_node(tmp_path):
    events = [
        X("ProfilerStep#1", 0, 1_000),
        # Forward: linear (7) runs t (7, creates TBackward0) and addmm (8, creates AddmmBackward0); the
        # slice before them also records 7 but created no node; relu is 9.
        X("aten::slice", 10, 5, **_seq(7)),
        X("aten::linear", 20, 40, **_seq(7)),
        X("aten::t", 22, 5, **_seq(7)),
        X("aten::addmm", 30, 25, **_seq(8)),
        X("aten::relu", 70, 10, **_seq(9)),
        # Backward on the same thread, in reverse order.
        X(NODE + "ReluBackward0", 300, 20, **_seq(9, 1)),
        X("ReluBackward0", 302, 15, **_seq(9, 1)),
        X("aten::threshold_backward", 305, 10),
        X(NODE + "AddmmBackward0", 330, 60, **_seq(8, 1)),
        X("aten::mm", 335, 30),
        X("aten::add_", 370, 15),  # a gradient accumulated into the next node's input
        # Engine work outside every node has no row.
        X("aten::zeros", 395, 3),
        # A node on another thread (the engine's device thread on a GPU run), for the forward op on 11.
        X(NODE + "TBackward0", 400, 20, tid=12, **_seq(7, 1)),
        X("aten::t", 405, 5, tid=12),
        # A node whose forward op is not in the capture: linked to no forward op.
        X(NODE + "MulBackward0", 450, 10, **_seq(3, 1)),
    ]
    with _store(tmp_path, events) as store:
        links = _links(store)
        assert links[NODE + "ReluBackward0"] == (NODE + "ReluBackward0", "aten::relu", 11)
        assert links["ReluBackward0"][1:] == ("aten::relu", 11)
        assert links["aten::threshold_backward"] == (NODE + "ReluBackward0", "aten::relu", 11)
        assert links["aten::mm"] == (NODE + "AddmmBackward0", "aten::addmm", 11)
        assert links["aten::add_"] == (NODE + "AddmmBackward0", "aten::addmm", 11)
        # The node on thread 12 is charged to t on thread 11, not to linear or slice (same number, earlier).
        assert links[NODE + "TBackward0"] == (NODE + "TBackward0", "aten::t", 11)
        assert links[NODE + "MulBackward0"] == (NODE + "MulBackward0", None, None)
        assert "aten::zeros" not in links
        # Forward ops are not backward ops.
        assert not {"aten::linear", "aten::addmm", "aten::relu", "aten::slice"} & set(links)
        # Every backward op once.
        assert store.rows("SELECT count(*), count(DISTINCT op_id) FROM backward_links")[0] == (9, 9)


def test_a_trace_without_sequence_numbers_has_no_links(tmp_path):
    events = [X("ProfilerStep#1", 0, 1_000), X("aten::mm", 10, 100), X(NODE + "MmBackward0", 200, 50),
              X("aten::mm", 210, 20)]
    with _store(tmp_path, events) as store:
        assert store.rows("SELECT count(*) FROM backward_links")[0][0] == 0
