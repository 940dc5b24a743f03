"""A plain training loop for compare's verdict checks: ``--extra-pct P`` does P% more work per step.

    python compare_job.py STEPS [--extra-pct P] [--threads N] [--max-seconds S]

A step is ``UNITS`` identical forward+backward passes, then one optimizer step;
``--extra-pct 25`` runs 25% more passes (``UNITS * 1.25``), so the work added is
known exactly. No mlprof import: it runs unmodified under `mlprof run`.
"""

from __future__ import annotations

import argparse
import time

import torch
import torch.nn.functional as F
from torch import nn

# Passes per step of the base run: a step of about 30-50 ms at one thread on a 2-vCPU machine (each pass
# is mostly the cost of issuing its ops).
UNITS = 20


def passes_for(extra_pct: float) -> int:
    passes = UNITS * (1 + extra_pct / 100.0)
    if abs(passes - round(passes)) > 1e-9:
        raise SystemExit(f"--extra-pct {extra_pct:g}: must give a whole number of passes of {UNITS}")
    return round(passes)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("steps", type=int)
    parser.add_argument("--extra-pct", type=float, default=0.0, help="more work per step, % (multiples of 5)")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's own)")
    parser.add_argument("--max-seconds", type=float, default=None,
                        help="stop after this long even before STEPS (a profiled window of slow steps ends by "
                             "60 s: the steps after it only cost time)")
    args = parser.parse_args()
    torch.manual_seed(0)
    if args.threads:
        torch.set_num_threads(args.threads)
    model = nn.Sequential(nn.Linear(128, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(128, 128), torch.randint(0, 10, (128,))
    passes = passes_for(args.extra_pct)
    deadline = None if args.max_seconds is None else time.monotonic() + args.max_seconds
    for _ in range(args.steps):
        if deadline is not None and time.monotonic() > deadline:
            break
        opt.zero_grad()
        for _ in range(passes):  # gradient accumulation: the same work again
            F.cross_entropy(model(x), y).backward()
        opt.step()


if __name__ == "__main__":
    main()
