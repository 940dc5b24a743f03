"""A plain training loop for compare's verdict checks: ``--micro-batches 2`` does twice the work per step.

    python compare_job.py STEPS [--micro-batches N]

No mlprof import: it runs unmodified under `mlprof run`.
"""

from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F
from torch import nn


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("steps", type=int)
    parser.add_argument("--micro-batches", type=int, default=1, help="forward+backward passes per optimizer step")
    args = parser.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)  # steadier step times on a shared host
    model = nn.Sequential(nn.Linear(128, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(256, 128), torch.randint(0, 10, (256,))
    for _ in range(args.steps):
        opt.zero_grad()
        for _ in range(args.micro_batches):  # gradient accumulation: the same work again
            F.cross_entropy(model(x), y).backward()
        opt.step()


if __name__ == "__main__":
    main()
