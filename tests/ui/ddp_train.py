"""A 2-process gloo DDP training loop for the dashboard's cluster page; rank 1 is slower on purpose.

Run under ``mlprof run -- python -m torch.distributed.run --nproc_per_node=2 ddp_train.py``: no
profiler code here, mlprof run profiles both ranks through the environment.
"""

import time

import torch
import torch.distributed as dist
from torch import nn

dist.init_process_group("gloo")
rank = dist.get_rank()
torch.set_num_threads(1)
torch.manual_seed(0)
model = nn.parallel.DistributedDataParallel(nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 10)))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
x, y = torch.randn(64, 64), torch.randint(0, 10, (64,))
for _ in range(10):
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    if rank == 1:
        time.sleep(0.02)  # the slow rank: the other one waits in all-reduce
    loss.backward()
    opt.step()
# Both ranks done before the group goes: without it, gloo's teardown aborts a rank now and then
# ("terminate called without an active exception"), with or without mlprof.
dist.barrier()
dist.destroy_process_group()
