"""A training script that runs torch.profiler itself (for `mlprof run` tests).

    python own_profiler_script.py STEPS PROFILE_FROM_STEP TRACE_PATH [--build-at N] [--wait N] [--warmup N]
                                  [--repeat N] [--exit-code N]

The profiler (a schedule, export_chrome_trace in on_trace_ready) is built at
step ``--build-at`` (default: PROFILE_FROM_STEP) and entered then; with
``--wait``/``--warmup`` its session starts later, at step PROFILE_FROM_STEP +
wait (prepared) and + wait + warmup (enabled). Each trace goes to TRACE_PATH
(``TRACE_PATH.N`` after the first). Exits with ``--exit-code``.
"""

import argparse
import sys

import torch
from torch.profiler import ProfilerActivity, profile, schedule

parser = argparse.ArgumentParser()
parser.add_argument("steps", type=int)
parser.add_argument("start_at", type=int)
parser.add_argument("trace_path")
parser.add_argument("--build-at", type=int, default=None)
parser.add_argument("--wait", type=int, default=0)
parser.add_argument("--warmup", type=int, default=1)
parser.add_argument("--repeat", type=int, default=1)
parser.add_argument("--exit-code", type=int, default=0)
args = parser.parse_args()
build_at = args.start_at if args.build_at is None else args.build_at

model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
traces = []


def train_step() -> None:
    loss = model(torch.randn(16, 32)).square().mean()
    opt.zero_grad()
    loss.backward()
    opt.step()


def export(prof) -> None:
    path = args.trace_path if not traces else f"{args.trace_path}.{len(traces)}"
    prof.export_chrome_trace(path)
    traces.append(path)


for _ in range(build_at):
    train_step()
with profile(activities=[ProfilerActivity.CPU],
             schedule=schedule(skip_first=args.start_at - build_at, wait=args.wait, warmup=args.warmup, active=2,
                               repeat=args.repeat),
             on_trace_ready=export) as prof:
    for _ in range(args.steps - build_at):
        train_step()
        prof.step()
print("trained", len(traces), flush=True)
sys.exit(args.exit_code)
