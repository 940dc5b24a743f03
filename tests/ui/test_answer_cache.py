"""The dashboard's advisor, compare and cluster answers kept on disk beside the tables (ui/answer_cache.py)."""

from __future__ import annotations

import json
import warnings

import pytest

from mlprof.parse import parse_path
from mlprof.ui.answer_cache import CACHE_DIR, cached_answer
from mlprof.ui.server import create_app

from .conftest import api_get, make_trace

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient


def _client(root):
    return TestClient(create_app(root), base_url="http://127.0.0.1")


@pytest.fixture
def two_runs(tmp_path):
    for name, kw in (("base", {}), ("new", {"op_dur_us": {"aten::relu": 90}})):
        (tmp_path / f"{name}.pt.trace.json").write_text(json.dumps(make_trace(**kw)))
        parse_path(tmp_path / f"{name}.pt.trace.json")
    return tmp_path


def _fail(*_a, **_k):
    raise AssertionError("recomputed: the answer should have come from the disk cache")


def test_a_restarted_server_answers_the_advisor_and_compare_from_disk(two_runs, monkeypatch):
    with _client(two_runs) as c:
        advice = api_get(c, "/api/advisor", run="new_mlprof_output")
        compared = api_get(c, "/api/compare", run="new_mlprof_output", base="base_mlprof_output")
    cache = two_runs / "new_mlprof_output" / CACHE_DIR
    assert sorted(p.name.split("-")[0] for p in cache.glob("*.json")) == ["advisor", "compare"]
    # A new server (nothing in memory): the answers are read back, the analyses never run.
    monkeypatch.setattr("mlprof.analysis.advisor.advise", _fail)
    monkeypatch.setattr("mlprof.ui.server.compare_answer", _fail)
    with _client(two_runs) as c:
        assert api_get(c, "/api/advisor", run="new_mlprof_output") == advice
        assert api_get(c, "/api/compare", run="new_mlprof_output", base="base_mlprof_output") == compared


def test_a_reparse_makes_the_cached_answer_stale(two_runs, monkeypatch):
    with _client(two_runs) as c:
        api_get(c, "/api/advisor", run="new_mlprof_output")
    parse_path(two_runs / "new.pt.trace.json")  # new tables dir: new signature
    calls = []
    from mlprof.analysis import advisor

    real = advisor.advise
    monkeypatch.setattr("mlprof.analysis.advisor.advise", lambda store: calls.append(1) or real(store))
    with _client(two_runs) as c:
        api_get(c, "/api/advisor", run="new_mlprof_output")
    assert calls == [1]
    # One advisor answer is kept: the stale one was removed when the new one was written.
    assert len(list((two_runs / "new_mlprof_output" / CACHE_DIR).glob("advisor-*.json"))) == 1


def test_a_cache_that_cannot_be_used_never_fails_the_answer(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (tmp_path / "elsewhere").mkdir()
    (run / CACHE_DIR).symlink_to(tmp_path / "elsewhere")  # never followed
    assert cached_answer(run, "advisor", ("k",), lambda: {"a": 1}) == {"a": 1}
    assert list((tmp_path / "elsewhere").iterdir()) == []
    (run / CACHE_DIR).unlink()
    (run / CACHE_DIR).mkdir()
    key = ("k", 2)
    assert cached_answer(run, "advisor", key, lambda: {"a": 2}) == {"a": 2}
    (path,) = (run / CACHE_DIR).glob("advisor-*.json")
    path.write_text("{not json")  # a torn file: recomputed and rewritten
    assert cached_answer(run, "advisor", key, lambda: {"a": 3}) == {"a": 3}
    assert cached_answer(run, "advisor", key, _fail) == {"a": 3}
