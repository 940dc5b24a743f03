"""How much of the run-to-run spread of one job is the host's speed, not the job (issue 29).

    python benchmarks/host_speed.py [--runs 12] [--steps 40] [--cpu N]

Starts ``--runs`` fresh processes of compare's job (tests/scenarios/compare_job.py's model: 20 forward and
backward passes of an MLP a step, one torch thread), one after the other. Each times its steps and, right
before its first step and right after its last, a fixed speed anchor in the same process: the median of 15
repetitions of a 256x256 matmul (10 of them) and of a 20,000-iteration pure-Python loop. Prints one line a run,
then the spread of the runs' median step (max/min), of the anchors, and of the step time divided by the mean
matmul anchor: if that ratio spreads far less than the step time does, the runs differ by the host's speed,
which a speed anchor measured beside the steps could take out of compare's verdict.

Measures, gates nothing: exit 0 whatever it finds. Needs torch.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

# The job each run executes (python -c): prints one JSON line.
_JOB = r"""
import json, statistics, sys, time
import torch, torch.nn.functional as F
from torch import nn
torch.set_num_threads(1)

def matmul_ms():
    a, b = torch.randn(256, 256), torch.randn(256, 256)
    times = []
    for _ in range(15):
        t = time.perf_counter()
        for _ in range(10):
            a @ b
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e3

def python_ms():
    times = []
    for _ in range(15):
        t = time.perf_counter(); s = 0
        for i in range(20000):
            s += i * i
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e3

before = (matmul_ms(), python_ms())
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(128, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(128, 128), torch.randint(0, 10, (128,))
steps = []
for _ in range(int(sys.argv[1])):
    t = time.perf_counter()
    opt.zero_grad()
    for _ in range(20):
        F.cross_entropy(model(x), y).backward()
    opt.step()
    steps.append(time.perf_counter() - t)
after = (matmul_ms(), python_ms())
print(json.dumps({"step_ms": statistics.median(steps[3:]) * 1e3, "matmul_ms": [before[0], after[0]],
                  "python_ms": [before[1], after[1]]}))
"""


def spread(values: list[float]) -> str:
    return f"{max(values) / min(values):.2f}x (CV {statistics.pstdev(values) / statistics.mean(values):.1%})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=12)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--cpu", type=int, default=None, help="pin each run to this CPU (taskset)")
    args = parser.parse_args()
    pin = ["taskset", "-c", str(args.cpu)] if args.cpu is not None else []
    rows = []
    for i in range(args.runs):
        done = subprocess.run([*pin, sys.executable, "-c", _JOB, str(args.steps)], capture_output=True, text=True,
                              timeout=600)
        if done.returncode != 0:
            print(f"run {i}: failed: {done.stderr.strip().splitlines()[-1:]}")
            continue
        r = json.loads(done.stdout.strip().splitlines()[-1])
        r["ratio"] = r["step_ms"] / statistics.mean(r["matmul_ms"])
        rows.append(r)
        print(f"run {i:2d}: step {r['step_ms']:6.1f} ms   matmul anchor {r['matmul_ms'][0]:.2f} / "
              f"{r['matmul_ms'][1]:.2f} ms   python anchor {r['python_ms'][0]:.2f} / {r['python_ms'][1]:.2f} ms   "
              f"step / anchor {r['ratio']:.1f}", flush=True)
    if len(rows) < 2:
        return
    print(f"median step:         {spread([r['step_ms'] for r in rows])}")
    print(f"matmul anchor:       {spread([statistics.mean(r['matmul_ms']) for r in rows])}")
    print(f"python anchor:       {spread([statistics.mean(r['python_ms']) for r in rows])}")
    print(f"step / matmul anchor: {spread([r['ratio'] for r in rows])}")


if __name__ == "__main__":
    main()
