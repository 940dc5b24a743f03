"""A training script that runs torch.profiler itself (for `mlprof run` tests).

    python own_profiler_script.py STEPS PROFILE_FROM_STEP TRACE_PATH
"""

import sys

import torch
from torch.profiler import ProfilerActivity, profile, schedule

steps, start_at, trace_path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.05)


def train_step() -> None:
    loss = model(torch.randn(16, 32)).square().mean()
    opt.zero_grad()
    loss.backward()
    opt.step()


for _ in range(start_at):
    train_step()
with profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=0, warmup=1, active=2, repeat=1),
             on_trace_ready=lambda p: p.export_chrome_trace(trace_path)) as prof:
    for _ in range(steps - start_at):
        train_step()
        prof.step()
print("trained", flush=True)
