"""Ordinary CPU training loops, each with one known cost, for `mlprof run` attribution tests.

    python attribution_jobs.py SCENARIO STEPS OUT_DIR

Nothing here knows about mlprof. Each scenario's cost sits at a line marked
``# COST`` so the tests can find the file:line mlprof should name.
"""

from __future__ import annotations

import gc
import sys
from pathlib import Path

import torch
from torch import nn

torch.manual_seed(0)
torch.set_num_threads(1)


class RowDropout(nn.Module):
    """A hand-written dropout that builds its mask row by row (a Python loop of tiny ops)."""

    def forward(self, x):
        mask = torch.empty_like(x)
        for i in range(x.shape[0]):
            mask[i] = torch.bernoulli(torch.full((x.shape[1],), 0.5))  # COST row_dropout
        return x * mask * 2.0


class Net(nn.Module):
    def __init__(self, dropout: nn.Module | None = None) -> None:
        super().__init__()
        self.fc1 = nn.Linear(64, 128)
        self.act = nn.ReLU()
        self.drop = dropout or nn.Identity()
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        return self.fc2(self.drop(self.act(self.fc1(x))))


def batches(steps: int):
    for _ in range(steps):
        yield torch.randn(256, 64), torch.randint(0, 10, (256,))


def train_plain(model: nn.Module, steps: int, opt=None, per_sample: bool = False, after_step=None) -> None:
    opt = opt or torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    for x, y in batches(steps):
        if per_sample:
            out = torch.stack([model(x[i:i + 1])[0] for i in range(x.shape[0])])  # COST per_sample
        else:
            out = model(x)
        loss = loss_fn(out, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if after_step:
            after_step(model)


def main() -> None:
    scenario, steps, out = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3])
    out.mkdir(parents=True, exist_ok=True)
    if scenario == "row_dropout":
        train_plain(Net(RowDropout()), steps)
    elif scenario == "per_sample":
        train_plain(Net(), steps, per_sample=True)
    elif scenario == "torch_save":
        big = nn.Sequential(*[nn.Linear(512, 512) for _ in range(8)])

        def checkpoint(model: nn.Module) -> None:
            torch.save(big.state_dict(), out / "ckpt.pt")  # COST torch_save

        train_plain(Net(), steps, after_step=checkpoint)
    elif scenario == "gc_storm":
        keep: list = []

        def churn(model: nn.Module) -> None:
            # Cyclic garbage and a growing live set: gen-2 collections every step.
            for _ in range(20_000):
                a: list = []
                a.append(a)
                keep.append({"i": len(keep)})
            gc.collect(2)  # COST gc_storm

        train_plain(Net(), steps, after_step=churn)
    elif scenario == "closure":
        model = nn.Sequential(nn.Linear(64, 256), nn.Tanh(), nn.Linear(256, 256), nn.Tanh(), nn.Linear(256, 10))
        opt = torch.optim.LBFGS(model.parameters(), lr=0.1, max_iter=4)
        loss_fn = nn.CrossEntropyLoss()
        for x, y in batches(steps):
            def closure():
                opt.zero_grad()
                loss = loss_fn(model(x), y)
                loss.backward()
                return loss

            opt.step(closure)
    elif scenario == "lightning_style":
        # What Lightning's automatic optimization does: forward and backward inside optimizer.step(closure).
        model = Net()
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        loss_fn = nn.CrossEntropyLoss()
        for x, y in batches(steps):
            def training_step_and_backward():
                loss = loss_fn(model(x), y)
                opt.zero_grad()
                loss.backward()
                return loss

            opt.step(closure=training_step_and_backward)
    elif scenario == "annotated":
        from torch.autograd.profiler import record_function

        model = nn.Sequential(nn.Linear(64, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        loss_fn = nn.CrossEntropyLoss()
        data = list(batches(steps))
        for i in range(steps):
            with record_function("train_step"):
                with record_function("## load_batch ##"):
                    x, y = data[i][0].clone(), data[i][1].clone()
                    x = (x - x.mean()) / x.std()
                with record_function("## forward ##"):
                    loss = loss_fn(model(x), y)
                with record_function("## backward ##"):
                    loss.backward()
                with record_function("## optimizer ##"):
                    opt.step()
                    opt.zero_grad()
    else:
        raise SystemExit(f"unknown scenario {scenario}")


if __name__ == "__main__":
    main()
