"""How much of the run-to-run spread of one job is the host's speed, not the job (issue 29).

    python benchmarks/host_speed.py [--runs 12] [--steps 40] [--cpu N]
    python benchmarks/host_speed.py --interleaved [--jobs mlp,conv,big] [--threads 1,2] [--runs 8]

Starts ``--runs`` fresh processes of compare's job (tests/scenarios/compare_job.py's model: 20 forward and
backward passes of an MLP a step, one torch thread), one after the other. Each times its steps and, right
before its first step and right after its last, a fixed speed anchor in the same process: the median of 15
repetitions of a 256x256 matmul (10 of them) and of a 20,000-iteration pure-Python loop. Prints one line a run,
then the spread of the runs' median step (max/min), of the anchors, and of the step time divided by the mean
matmul anchor: if that ratio spreads far less than the step time does, the runs differ by the host's speed,
which a speed anchor measured beside the steps could take out of compare's verdict.

``--interleaved`` measures what compare uses instead (``steps.speed_probe_ns``): mlprof's own probe
(``mlprof.collect.speed_probe.SpeedProbe``, at its own rate) and a pure-Python loop, timed after every step,
for each job shape in ``--jobs`` (mlp: compare's job; conv: a small CNN; big: two 1024-wide layers on 512 rows)
at each thread count in ``--threads``. Per shape it prints the spread of the runs' median step (thread CPU
time) and of the same steps divided by the local probe (``analysis.compare_speed.steps_at_one_speed``, the
function compare uses) and by the local Python loop.

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


# --interleaved: one job shape at one thread count; prints one JSON line of per-step figures.
_JOB_INTERLEAVED = r"""
import json, sys, time
import torch, torch.nn.functional as F
from torch import nn
from mlprof.collect.speed_probe import SpeedProbe
kind, steps, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
torch.set_num_threads(threads)
torch.manual_seed(0)
if kind == "mlp":
    model = nn.Sequential(nn.Linear(128, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))
    x, y, passes = torch.randn(128, 128), torch.randint(0, 10, (128,)), 20
elif kind == "conv":
    model = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                          nn.Linear(32, 10))
    x, y, passes = torch.randn(32, 3, 32, 32), torch.randint(0, 10, (32,)), 5
else:
    model = nn.Sequential(nn.Linear(1024, 1024), nn.Linear(1024, 10))
    x, y, passes = torch.randn(512, 1024), torch.randint(0, 10, (512,)), 2
opt = torch.optim.SGD(model.parameters(), lr=0.01)
probe = SpeedProbe()

def python_loop_ns():
    start = time.thread_time_ns(); s = 0
    for i in range(3000):
        s += i * i
    return time.thread_time_ns() - start

rows = []
for i in range(steps):
    start, cpu = time.time_ns(), time.thread_time_ns()
    opt.zero_grad()
    for _ in range(passes):
        F.cross_entropy(model(x), y).backward()
    opt.step()
    rows.append([start, time.thread_time_ns() - cpu, probe.maybe_run(), python_loop_ns()])
print(json.dumps(rows[3:]))
"""


def interleaved(args: argparse.Namespace, pin: list[str]) -> None:
    from mlprof.analysis.compare_speed import steps_at_one_speed

    for kind in args.jobs.split(","):
        for threads in (int(t) for t in args.threads.split(",")):
            medians = {"step": [], "step / probe": [], "step / python loop": []}
            for _ in range(args.runs):
                done = subprocess.run([*pin, sys.executable, "-c", _JOB_INTERLEAVED, kind, str(args.steps),
                                       str(threads)], capture_output=True, text=True, timeout=600)
                if done.returncode != 0:
                    print(f"{kind} {threads}: failed: {done.stderr.strip().splitlines()[-1:]}")
                    continue
                rows = json.loads(done.stdout.strip().splitlines()[-1])
                medians["step"].append(statistics.median(r[1] for r in rows))
                for label, col in (("step / probe", 2), ("step / python loop", 3)):
                    at_speed = steps_at_one_speed([(r[0], r[1], 0, r[col]) for r in rows])
                    if at_speed is not None:
                        medians[label].append(statistics.median(at_speed.per_probe))
            for label, values in medians.items():
                if len(values) > 1:
                    print(f"{kind:<5} {threads} thread(s) {label:<19} {spread(values)}  ({len(values)} runs)",
                          flush=True)


def spread(values: list[float]) -> str:
    return f"{max(values) / min(values):.2f}x (CV {statistics.pstdev(values) / statistics.mean(values):.1%})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=12)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--cpu", type=int, default=None, help="pin each run to this CPU (taskset)")
    parser.add_argument("--interleaved", action="store_true",
                        help="time mlprof's speed probe and a Python loop after every step instead (see above)")
    parser.add_argument("--jobs", default="mlp,conv,big", help="--interleaved: job shapes (default mlp,conv,big)")
    parser.add_argument("--threads", default="1,2", help="--interleaved: torch thread counts (default 1,2)")
    args = parser.parse_args()
    pin = ["taskset", "-c", str(args.cpu)] if args.cpu is not None else []
    if args.interleaved:
        interleaved(args, pin)
        return
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
