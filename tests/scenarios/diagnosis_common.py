"""What the diagnosis jobs share: small models, endless synthetic data and the training loop.

Nothing here knows about mlprof (see diagnosis_jobs.py). The loop runs like a
real job's: on past the profiler's default window (a warm-up, then at least 20
steps and 2 s of them), for at least ``RUN["steps"]`` steps and
``RUN["seconds"]`` seconds, so that `mlprof run` with no option sees the job a
user would give it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import torch
from torch import nn
from torch.nn import functional as F

__all__ = ["RUN", "loop_steps", "mlp", "SmallCNN", "TinyTransformer", "CellRNN", "RowDropout", "WhitenedMLP",
           "SortPooled", "epochs", "vectors", "images", "token_batches", "sequences", "train"]

# The least a job runs (set by diagnosis_jobs.py's --steps and --seconds).
RUN = {"steps": 40, "seconds": 5.0}


def loop_steps(min_steps: int | None = None, seconds: float | None = None) -> Iterator[int]:
    """Step numbers until the job has run ``min_steps`` steps and ``seconds`` seconds (both default to RUN)."""
    min_steps = RUN["steps"] if min_steps is None else min_steps
    seconds = RUN["seconds"] if seconds is None else seconds
    start = time.perf_counter()
    step = 0
    while step < min_steps or time.perf_counter() - start < seconds:
        yield step
        step += 1


# ---------------------------------------------------------------- models

def mlp(width: int = 256, depth: int = 3, dtype=torch.float32) -> nn.Module:
    layers: list[nn.Module] = []
    for i in range(depth):
        layers += [nn.Linear(64 if i == 0 else width, width), nn.ReLU()]
    return nn.Sequential(*layers, nn.Linear(width, 10)).to(dtype)


class SmallCNN(nn.Module):
    def __init__(self, channels: int = 16) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, channels, 3, padding=1)
        self.conv2 = nn.Conv2d(channels, channels * 2, 3, padding=1)
        self.head = nn.Linear(channels * 2, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.relu(self.conv2(x))
        return self.head(x.mean(dim=(2, 3)))


class TinyTransformer(nn.Module):
    """Token embedding + one encoder layer + mean pooling: a small text classifier."""

    def __init__(self, vocab: int = 1000, dim: int = 64) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.encoder = nn.TransformerEncoderLayer(dim, nhead=4, dim_feedforward=128, batch_first=True)
        self.head = nn.Linear(dim, 10)

    def forward(self, tokens):
        return self.head(self.encoder(self.embed(tokens)).mean(dim=1))


class CellRNN(nn.Module):
    """An LSTM classifier; ``per_step_cell`` unrolls an LSTMCell in Python, one timestep at a time."""

    def __init__(self, per_step_cell: bool, dim: int = 32, hidden: int = 64) -> None:
        super().__init__()
        self.per_step_cell = per_step_cell
        self.lstm = nn.LSTM(dim, hidden, batch_first=True)
        self.cell = nn.LSTMCell(dim, hidden)
        self.head = nn.Linear(hidden, 10)

    def forward(self, x):
        if not self.per_step_cell:
            _, (h, _) = self.lstm(x)
            return self.head(h[-1])
        h = x.new_zeros(x.shape[0], self.cell.hidden_size)
        c = torch.zeros_like(h)
        for t in range(x.shape[1]):
            h, c = self.cell(x[:, t], (h, c))
        return self.head(h)


class RowDropout(nn.Module):
    """A hand-written dropout building its mask one row at a time (a storm of tiny ops)."""

    def forward(self, x):
        mask = torch.empty_like(x)
        for i in range(x.shape[0]):
            mask[i] = torch.bernoulli(torch.full(x.shape[1:], 0.5))
        return x * mask * 2.0


class WhitenedMLP(nn.Module):
    """An MLP whose input whitening recomputes an eigendecomposition every forward."""

    def __init__(self, recompute: bool) -> None:
        super().__init__()
        self.recompute = recompute
        self.body = mlp(width=128, depth=2)
        self.register_buffer("proj", torch.eye(64))

    def forward(self, x):
        if self.recompute:
            feats = torch.cat([x, x.roll(1, 1), x.roll(2, 1), x.roll(3, 1)], dim=1)  # 256 features
            cov = feats.T @ feats / feats.shape[0] + torch.eye(feats.shape[1])
            for _ in range(3):
                _, vecs = torch.linalg.eigh(cov)
            proj = vecs[:64, :64]
        else:
            proj = self.proj
        return self.body(x @ proj)


class SortPooled(nn.Module):
    """An embedding model pooling by the median token, computed with a full sort (fixed: the mean)."""

    def __init__(self, use_sort: bool, vocab: int = 5000, dim: int = 64) -> None:
        super().__init__()
        self.use_sort = use_sort
        self.embed = nn.Embedding(vocab, dim)
        self.head = nn.Linear(dim, 10)

    def forward(self, tokens):
        e = self.embed(tokens)  # (batch, seq, dim)
        if self.use_sort:
            flat = e.reshape(e.shape[0], -1)
            ranked = torch.cat([flat.sort(dim=1, stable=True).values for _ in range(4)], dim=1)
            pooled = e.mean(dim=1) + 1e-3 * ranked[:, :e.shape[2]]
        else:
            pooled = e.mean(dim=1)
        return self.head(pooled)


# ---------------------------------------------------------------- data and loop

def epochs(loader) -> Iterator:
    """A DataLoader's batches, epoch after epoch."""
    while True:
        yield from loader


def vectors(batch: int = 256, dtype=torch.float32) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    while True:
        yield torch.randn(batch, 64, dtype=dtype), torch.randint(0, 10, (batch,))


def images(batch: int = 32, size: int = 32, dtype=torch.float32) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    while True:
        yield torch.randn(batch, 3, size, size, dtype=dtype), torch.randint(0, 10, (batch,))


def token_batches(batch: int = 32, seq: int = 64, vocab: int = 1000) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    while True:
        yield torch.randint(0, vocab, (batch, seq)), torch.randint(0, 10, (batch,))


def sequences(batch: int = 32, length: int = 48) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    while True:
        yield torch.randn(batch, length, 32), torch.randint(0, 10, (batch,))


def train(model: nn.Module, data, steps: int, forward: Callable | None = None,
          after_step: Callable[[int], None] | None = None, opt=None, seconds: float | None = None) -> None:
    """The usual loop: batch, forward, loss, backward, optimizer step, then ``after_step(step)``; for at
    least ``steps`` steps and ``seconds`` seconds (default RUN's; 0: exactly ``steps``)."""
    opt = opt or torch.optim.SGD(model.parameters(), lr=0.01)
    forward = forward or model
    it = iter(data)
    for step in loop_steps(steps, seconds):
        x, y = next(it)
        loss = F.cross_entropy(forward(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if after_step:
            after_step(step)


