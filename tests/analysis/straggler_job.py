"""A 4-rank gloo DDP job in which one rank is slowed by one cause (or none), for ``mlprof cluster``'s cause.

Run under ``mlprof run -- python -m torch.distributed.run --nproc_per_node=4 straggler_job.py MODE SLOW_RANK``:
no profiler code here. MODE is one of

* ``none``: every rank does the same work;
* ``gc``: the slow rank holds a large heap of Python objects and calls ``gc.collect()`` every step;
* ``data``: the slow rank's dataset sleeps in ``__getitem__`` (a slow input pipeline);
* ``forward``: the slow rank's model runs extra matmuls in its ``mixer`` module's forward;
* ``busy``: the slow rank shares its core with loops burning CPU (a busy neighbour): pinned to one core,
  with the loops pinned there too, it gets a fraction of that core while the others share the rest.

The slow rank's extra time makes the others wait in DDP's all-reduce. The busy loops live at most a
minute (``timeout``) and are killed as one group when the job ends.
"""

from __future__ import annotations

import gc
import os
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scenarios"))
from diagnosis_busy import start_busy, stop_busy  # noqa: E402  (a sibling folder's helper: no torch, no mlprof)

STEPS = 12
BATCH = 32


class Samples(torch.utils.data.Dataset):
    def __init__(self, n: int, sleep_s: float) -> None:
        g = torch.Generator().manual_seed(0)
        self.x, self.y = torch.randn(n, 128, generator=g), torch.randint(0, 10, (n,), generator=g)
        self.sleep_s = sleep_s

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i):
        if self.sleep_s:
            time.sleep(self.sleep_s)  # a slow decode/augment/read of one sample
        return self.x[i], self.y[i]


class Mixer(nn.Module):
    """Extra forward-only work (a statistic of the activations, as a metric or an EMA would compute):
    ``rounds`` matmuls without autograd, so backward stays the same; no parameters (DDP needs the same
    parameters on every rank)."""

    def __init__(self, rounds: int) -> None:
        super().__init__()
        self.rounds = rounds
        self.register_buffer("w", torch.randn(256, 256) / 16)

    def forward(self, h):
        with torch.no_grad():
            stat = h.detach()
            for _ in range(self.rounds):
                stat = torch.tanh(stat @ self.w)
        return h


class Net(nn.Module):
    def __init__(self, rounds: int) -> None:
        super().__init__()
        self.inp = nn.Linear(128, 256)
        self.mixer = Mixer(rounds)
        self.body = nn.Sequential(nn.Linear(256, 1024), nn.ReLU(), nn.Linear(1024, 256), nn.ReLU())
        self.out = nn.Linear(256, 10)

    def forward(self, x):
        return self.out(self.body(self.mixer(torch.relu(self.inp(x)))))


def main(mode: str, slow_rank: int) -> None:
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    slow = rank == slow_rank
    torch.set_num_threads(1)
    torch.manual_seed(0)
    busy = heap = None
    if slow and mode == "busy":
        cores = sorted(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {cores[-1]})  # the loops started below inherit this one core
        busy = start_busy(3, seconds=60, same_session=True)
    if slow and mode == "gc":
        heap = [{"id": i, "path": f"img_{i:07d}.jpg", "label": i % 10} for i in range(150_000)]
    model = nn.parallel.DistributedDataParallel(Net(rounds=400 if slow and mode == "forward" else 0))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    data = Samples(BATCH * (STEPS + 1), sleep_s=0.001 if slow and mode == "data" else 0.0)
    loader = torch.utils.data.DataLoader(data, batch_size=BATCH, num_workers=0)
    try:
        for x, y in loader:
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            # Every rank's share of a step off the CPU (a stand-in for device work or I/O): 4 ranks on a
            # 2-core host then do not queue for the cores, so a balanced job stays balanced.
            time.sleep(0.1)
            if heap is not None:
                gc.collect()  # "free memory" every step: a full collection walks the whole heap
    finally:
        if busy is not None:
            stop_busy(busy)
    # Every rank done before the group goes: gloo's teardown aborts a rank now and then without it.
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
