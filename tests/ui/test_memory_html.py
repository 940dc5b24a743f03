"""``export_memory_timeline("x.html")`` writes a page that renders offline without matplotlib."""

from __future__ import annotations

import importlib.util
import json
import sys

import pytest

import mlprof
from mlprof.collect.memory_page import memory_timeline_html


def test_the_page_inlines_its_chart_library_and_escapes_its_data():
    sizes = [[0, 100, 0, 0, 0, 0, 0, 0, 0], [0, 100, 0, 0, 50, 0, 0, 0, 0]]
    out = memory_timeline_html([1000, 3000], sizes, "cuda:0", title="</script><b>x</b>")
    assert "echarts" in out and "<script src" not in out and "http://" not in out.split("<script>")[0]
    assert "</script><b>" not in out  # the title is escaped
    assert '"categories": ["PARAMETER", "TEMPORARY"]' in out  # only categories that hold memory


def test_export_memory_timeline_html_works_without_matplotlib(tmp_path, monkeypatch):
    pytest.importorskip("torch")
    import torch

    monkeypatch.setitem(sys.modules, "matplotlib", None)
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name.startswith("matplotlib")
                        else real_find_spec(name, *a))
    model = torch.nn.Linear(64, 64)
    config = mlprof.ExperimentalConfig(profiler_level=mlprof.ProfilerLevel.Level2)
    with mlprof.profile(activities=[mlprof.ProfilerActivity.CPU], experimental_config=config) as prof:
        for _ in range(2):
            model(torch.randn(32, 64)).sum().backward()
            prof.step()
    prof.export_memory_timeline(tmp_path / "memory.html", device="cpu")
    text = (tmp_path / "memory.html").read_text()
    data = json.loads(text.split("const data = ")[1].split(";\n")[0])
    assert data["peak"] > 0 and data["categories"] and len(data["times"]) == len(data["sizes"])
