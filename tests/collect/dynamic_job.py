"""A training job for the dynamic-profiling tests, run as a subprocess.

    python dynamic_job.py CONFIG_DIR STEPS [--env-mode] [--step-s 0.05]

It writes its current step to CONFIG_DIR/../progress.txt so tests can time
their edits, and ends early once CONFIG_DIR/../stop exists (all ranks at the
same step), so a test need not wait for STEPS once it has its captures. In --env-mode it never imports mlprof: MLPROF_CONFIG_PATH and the
optimizer step drive everything.
"""

import argparse
import os
import sys
import time

import torch

parser = argparse.ArgumentParser()
parser.add_argument("config_dir")
parser.add_argument("steps", type=int)
parser.add_argument("--env-mode", action="store_true")
parser.add_argument("--step-s", type=float, default=0.05)
parser.add_argument("--ddp", action="store_true")
args = parser.parse_args()

if args.ddp:
    import torch.distributed as dist

    dist.init_process_group("gloo")
rank = int(os.environ.get("RANK", 0))
progress = os.path.join(os.path.dirname(os.path.abspath(args.config_dir)), f"progress_{rank}.txt")
stop_file = os.path.join(os.path.dirname(os.path.abspath(args.config_dir)), "stop")


def should_stop() -> bool:
    stop = os.path.exists(stop_file)
    if args.ddp:  # every rank stops at the same step, or a collective would hang
        flag = torch.tensor([1.0 if stop else 0.0])
        dist.all_reduce(flag)
        stop = bool(flag.item())
    return stop


model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
if args.ddp:
    model = torch.nn.parallel.DistributedDataParallel(model)
opt = torch.optim.SGD(model.parameters(), lr=0.05)
x, y = torch.randn(128, 32), torch.randint(0, 4, (128,))

if not args.env_mode:
    import mlprof

    mlprof.dynamic.init(args.config_dir)
for step in range(args.steps):
    loss = torch.nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    time.sleep(args.step_s)
    if not args.env_mode:
        mlprof.dynamic.step()
    with open(progress + ".tmp", "w") as f:
        f.write(str(step + 1))
    os.replace(progress + ".tmp", progress)
    if should_stop():
        break
if args.ddp:
    # Both ranks done before the group goes: without it, gloo's teardown aborts a rank now and then
    # ("terminate called without an active exception"), with or without mlprof (as in tests/run/train_script.py).
    dist.barrier()
    dist.destroy_process_group()
print("training finished", file=sys.stderr)
