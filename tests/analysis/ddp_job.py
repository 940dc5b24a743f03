"""A 2-process gloo DDP training job, profiled with mlprof; one rank is slow on purpose.

Run with ``python -m torch.distributed.run --nproc_per_node=2 ddp_job.py OUT SLOW_RANK SLEEP_S``.
The slow rank sleeps in every step before backward (a stand-in for a slower
host or an extra piece of work), so the other rank waits in all-reduce.
"""

from __future__ import annotations

import sys
import time

import torch
import torch.distributed as dist
from torch import nn

import mlprof


def main(out: str, slow_rank: int, sleep_s: float, steps: int = 6) -> None:
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = nn.parallel.DistributedDataParallel(nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 10)))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    x, y = torch.randn(64, 64), torch.randint(0, 10, (64,))
    with mlprof.profile(activities=[mlprof.ProfilerActivity.CPU], record_shapes=True,
                        schedule=mlprof.schedule(wait=1, warmup=1, active=steps, repeat=1),
                        on_trace_ready=mlprof.tensorboard_trace_handler(out, analyse_flag=False)) as prof:
        for _ in range(steps + 2):
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            if rank == slow_rank:
                time.sleep(sleep_s)
            loss.backward()
            opt.step()
            prof.step()
    # Both ranks done before the group goes: without it, gloo's teardown aborts a rank now and then
    # ("terminate called without an active exception"), with or without mlprof.
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), float(sys.argv[3]))
