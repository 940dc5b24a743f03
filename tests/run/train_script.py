"""An ordinary training script that knows nothing of mlprof (for `mlprof run` tests).

    python train_script.py STEPS [--fail-at N] [--kill-at N] [--ddp] [--sleep-s S] [--no-optimizer]

--kill-at N: the job kills itself (SIGKILL: no atexit, nothing saved) before step N.
"""

import argparse
import os
import signal
import sys
import time

import torch

parser = argparse.ArgumentParser()
parser.add_argument("steps", type=int)
parser.add_argument("--fail-at", type=int, default=-1)
parser.add_argument("--kill-at", type=int, default=-1)
parser.add_argument("--ddp", action="store_true")
parser.add_argument("--sleep-s", type=float, default=0.0)
parser.add_argument("--no-optimizer", action="store_true", help="inference: batches from a DataLoader only")
args = parser.parse_args()

if args.ddp:
    import torch.distributed as dist

    dist.init_process_group("gloo")
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
data = torch.utils.data.TensorDataset(torch.randn(64 * 16, 32), torch.randint(0, 4, (64 * 16,)))
loader = torch.utils.data.DataLoader(data, batch_size=64)
if args.no_optimizer:
    with torch.no_grad():
        for step in range(args.steps):
            for x, _y in loader:
                model(x)
                break
    sys.exit(0)
if args.ddp:
    model = torch.nn.parallel.DistributedDataParallel(model)
opt = torch.optim.SGD(model.parameters(), lr=0.05)
step = 0
while step < args.steps:
    for x, y in loader:
        if step == args.fail_at:
            raise SystemExit(3)
        if step == args.kill_at:
            os.kill(os.getpid(), signal.SIGKILL)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        time.sleep(args.sleep_s)
        step += 1
        if step >= args.steps:
            break
if args.ddp:
    # Both ranks done before the group goes: without it, gloo's teardown aborts a rank now and then
    # ("terminate called without an active exception"), with or without mlprof.
    dist.barrier()
    dist.destroy_process_group()
