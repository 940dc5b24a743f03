"""Benchmark of ``mlprof parse`` against the usual ways of loading a Kineto trace.

Makes (or takes, with ``--trace``) a CPU Kineto trace of at least ``--events``
events from a real CPU training loop, then measures in one run, each in its own
fresh subprocess so peak RSS is that tool's alone:

* ``mlprof parse`` to tables only, and with every export;
* Holistic Trace Analysis ``TraceAnalysis`` load (if installed);
* the TensorBoard plugin's loader (``torch-tb-profiler``, if installed);
* ``orjson.loads`` of the file (if installed).

and prints wall seconds, peak RSS and the ratios the issue sets as targets:
parse-to-tables <= 0.1x HTA, <= 0.6x orjson.loads, peak RSS <= 1.5x file size.

    python benchmarks/parse.py --events 1000000 --workdir /tmp/mlprof_bench

Peers need the ``bench`` extra: ``pip install -e .[bench]``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

_MAKE_TRACE = r"""
import sys, torch
from torch import nn
target_events, out = int(sys.argv[1]), sys.argv[2]
torch.manual_seed(0)
torch.set_num_threads(1)
layers = []
for _ in range(8):
    layers += [nn.Linear(16, 16), nn.ReLU()]
model = nn.Sequential(*layers)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
data = torch.utils.data.TensorDataset(torch.randn(4096, 16), torch.randn(4096, 16))
loader = torch.utils.data.DataLoader(data, batch_size=4)
def one_step(batch):
    x, y = batch
    opt.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
# Measure events per step on a short profile, then size the real one.
with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as p:
    it = iter(loader)
    for _ in range(5):
        one_step(next(it)); p.step()
per_step = max(1, len(p.events()) // 5)
steps = target_events // per_step + 2
# A schedule makes torch record ProfilerStep#N spans (one warmup step).
with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=True,
                            schedule=torch.profiler.schedule(wait=0, warmup=1, active=steps),
                            on_trace_ready=lambda prof: prof.export_chrome_trace(out)) as p:
    done = 0
    while done < steps + 1:
        for batch in loader:
            one_step(batch); p.step(); done += 1
            if done >= steps + 1:
                break
print(steps)
"""


def make_trace(target_events: int, path: Path) -> None:
    subprocess.run([sys.executable, "-c", _MAKE_TRACE, str(target_events), str(path)], check=True)


def count_events(path: Path) -> int:
    import msgspec

    class _Top(msgspec.Struct):
        traceEvents: list[msgspec.Raw] = []

    return len(msgspec.json.decode(path.read_bytes(), type=_Top).traceEvents)
