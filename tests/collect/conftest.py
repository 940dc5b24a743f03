from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")


class TinyTrainer:
    """A real (small) training loop: an MLP on synthetic data with SGD."""

    def __init__(self, seed: int = 0) -> None:
        torch.manual_seed(seed)
        self.model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.05)
        self.x = torch.randn(256, 32)
        self.y = (self.x[:, :4] * 3).argmax(dim=1)
        self.losses: list[float] = []

    def step(self) -> float:
        loss = torch.nn.functional.cross_entropy(self.model(self.x), self.y)
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        self.losses.append(loss.item())
        return self.losses[-1]


@pytest.fixture
def trainer() -> TinyTrainer:
    return TinyTrainer()


def load_json(path: Path) -> Any:
    return json.loads(path.read_text())


def windows_of(capture: Path) -> list[Path]:
    return sorted(p for p in (capture / "raw").iterdir() if p.name.startswith("window_"))


def profiler_steps_in_trace(trace_path: Path) -> list[int]:
    events = load_json(trace_path)["traceEvents"]
    return sorted(int(e["name"].split("#")[1]) for e in events if str(e.get("name", "")).startswith("ProfilerStep#"))
