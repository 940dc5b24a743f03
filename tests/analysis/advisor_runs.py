"""Real CPU training runs that reproduce the advisor's cases, profiled with mlprof.

Each scenario is a small but genuine training loop; ``capture(scenario, out)``
profiles it with ``mlprof.profile`` and returns the parsed output directory.
Used by the tests (torch needed) and runnable by hand:
``python tests/analysis/advisor_runs.py seed002_slow /tmp/x``.
"""

from __future__ import annotations

import gc
import sys
import time
from pathlib import Path

import torch
from torch import nn

import mlprof
from mlprof.parse import ParseOptions, parse_path

HIDDEN = 256


class SortDropout(nn.Module):
    """Seed 002's culprit: a hand-written dropout on a slow path.

    It drops exactly ``p`` of the elements by sorting one random number per
    element (an O(n log n) sort where a Bernoulli mask is O(n)).
    """

    def __init__(self, p: float = 0.5) -> None:
        super().__init__()
        self.p = p

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n = x.numel()
        # float64 and a full argsort on repeated draws: the "native, unoptimised" path.
        order = torch.rand(n * 16, dtype=torch.float64).argsort()[:n] % n
        mask = torch.ones(n)
        mask[order[: int(n * self.p)]] = 0.0
        return x * mask.view_as(x) / (1 - self.p)


def _model(slow_dropout: bool, hidden: int = HIDDEN) -> nn.Module:
    drop = SortDropout(0.5) if slow_dropout else nn.Dropout(0.5)
    return nn.Sequential(nn.Linear(64, hidden), nn.ReLU(), drop, nn.Linear(hidden, hidden), nn.ReLU(),
                         nn.Linear(hidden, 10))


class SlowDataset(torch.utils.data.Dataset):
    """Decoding an item costs real time (an expensive dataset, read in the main process)."""

    def __init__(self, n: int, cost_s: float) -> None:
        self.x = torch.randn(n, 64)
        self.y = torch.randint(0, 10, (n,))
        self.cost_s = cost_s

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int):
        time.sleep(self.cost_s)  # stands for file reading/decoding
        return self.x[i], self.y[i]


class BatchDataset(torch.utils.data.Dataset):
    """Ready-made batches in memory: loading costs next to nothing (the healthy case)."""

    def __init__(self, n_batches: int, batch: int = 64) -> None:
        self.x = torch.randn(n_batches, batch, 64)
        self.y = torch.randint(0, 10, (n_batches, batch))

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int):
        return self.x[i], self.y[i]


def _train(prof, steps: int, slow_dropout=False, item_cost_s=0.0, garbage=False, hidden=HIDDEN, batch=64) -> None:
    torch.manual_seed(0)
    # One intra-op thread: the test machines have 2 shared cores, and two
    # threads there turn a 100 us matmul into a 2 ms one (oversubscription).
    torch.set_num_threads(1)
    model = _model(slow_dropout, hidden)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    if item_cost_s:
        # num_workers=0: every item is read and collated in the training process, between steps.
        loader = torch.utils.data.DataLoader(SlowDataset(64 * (steps + 2), item_cost_s), batch_size=64,
                                             num_workers=0)
    else:
        loader = torch.utils.data.DataLoader(BatchDataset(steps + 2, batch), batch_size=None)
    keep = [[i] for i in range(150_000)] if garbage else []  # a big live heap makes full GCs slow
    for i, (x, y) in enumerate(loader):
        if i >= steps:
            break
        if garbage:
            # Cyclic garbage per step: the collector runs, and its full passes walk `keep`.
            for _ in range(2):
                junk = [{"a": [j]} for j in range(20_000)]
                junk.append(junk)
                del junk
            gc.collect()  # the anti-pattern seen in real loops: a forced full collection each step
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        prof.step()
    del keep


SCENARIOS = {
    # Steps of several ms: on a shared 2-core host a preemption must not double a step.
    "clean": {"hidden": 768, "batch": 128},
    "seed002_slow": {"slow_dropout": True},
    "seed002_fixed": {"slow_dropout": False},
    "data_loading": {"item_cost_s": 0.0005},
    "gc": {"garbage": True},
}


def capture(name: str, out: Path, steps: int = 8, record_shapes: bool = True, with_stack: bool = True,
            profile_memory: bool = False) -> Path:
    """Profile scenario ``name`` into ``out`` and parse it; returns the parsed output dir."""
    kwargs = SCENARIOS[name]
    cfg = mlprof.ExperimentalConfig(gc_detect_threshold=0)
    with mlprof.profile(activities=[mlprof.ProfilerActivity.CPU], record_shapes=record_shapes,
                        with_stack=with_stack, profile_memory=profile_memory,
                        schedule=mlprof.schedule(wait=1, warmup=1, active=steps, repeat=1),
                        experimental_config=cfg,
                        on_trace_ready=mlprof.tensorboard_trace_handler(str(out), analyse_flag=False)) as prof:
        _train(prof, steps + 3, **kwargs)
    (cap,) = [p for p in Path(out).iterdir() if p.name.endswith("_mlprof")]
    return Path(parse_path(cap, ParseOptions())[0].output_dir)


if __name__ == "__main__":
    print(capture(sys.argv[1], Path(sys.argv[2])))
