"""A training job that knows nothing of mlprof, for monitor mode's tests (`mlprof run --monitor`).

    python monitor_job.py STEPS --kind steady|stall|slowdown|leak [--from STEP] [--every N]

steady: the same small MLP step throughout. stall: from --from on, every --every-th step also runs
``slow_python_call`` (pure Python, about 30 ms of CPU). slowdown: from --from on every step also runs
extra matmuls (a lasting drop in throughput). leak: from --from on every step keeps 1 MiB alive.
One torch thread: the job's step time does not depend on how many cores the machine lends it.
"""

import argparse

import torch

parser = argparse.ArgumentParser()
parser.add_argument("steps", type=int)
parser.add_argument("--kind", default="steady", choices=("steady", "stall", "slowdown", "leak"))
parser.add_argument("--from", dest="start", type=int, default=120)
parser.add_argument("--every", type=int, default=5)
args = parser.parse_args()
torch.set_num_threads(1)
torch.manual_seed(0)

model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 256),
                            torch.nn.ReLU(), torch.nn.Linear(256, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(128, 256)
y = torch.randint(0, 10, (128,))
extra = torch.randn(384, 384)
kept = []


def slow_python_call() -> int:
    total = 0
    for i in range(300_000):
        total += i * i % 7
    return total


for step in range(args.steps):
    loss = torch.nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    if step >= args.start:
        if args.kind == "stall" and step % args.every == 0:
            slow_python_call()
        elif args.kind == "slowdown":
            for _ in range(6):
                extra @ extra
        elif args.kind == "leak":
            kept.append(b"\1" * (1 << 20))  # written: calloc'd zeros would not count in RSS
    opt.step()
