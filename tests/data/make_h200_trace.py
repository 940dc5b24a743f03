"""Make tests/data/h200_ddp_transformer.pt.trace.json.gz: a real GPU training loop profiled by torch.profiler.

A small transformer (4 encoder layers, d_model 256) under DDP over NCCL (world size 1), AdamW, bf16
autocast, ``record_shapes`` and ``profile_memory`` on; ACTIVE steps in one window. Run on a GPU
machine (it was made on one NVIDIA H200, torch 2.11.0+cu130, 2026-11-26):

    python tests/data/make_h200_trace.py /tmp/gpu.json 120
    python tests/data/make_h200_trace.py --cut /tmp/gpu.json tests/data/h200_ddp_transformer.pt.trace.json.gz 40 4

``--cut SRC DST FIRST N`` keeps steps FIRST..FIRST+N-1 (by their order in the trace), the metadata, and
the flows whose two ends are both kept.
"""
import os, sys, time
import torch
import torch.nn as nn
from pathlib import Path


def cut(src: str, dst: str, first: int, n: int) -> None:
    import gzip, json
    from collections import Counter
    data = Path(src).read_bytes()
    doc = json.loads(gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data)
    events = doc["traceEvents"]
    steps = sorted((e["ts"], e["ts"] + e["dur"]) for e in events
                   if e.get("name", "").startswith("ProfilerStep#") and e.get("cat") == "user_annotation")
    lo, hi = steps[first][0], steps[first + n - 1][1]
    keep = [e for e in events if e.get("ph") == "M" or "ts" not in e or lo <= float(e["ts"]) < hi]
    ends = Counter((e.get("cat"), e.get("id")) for e in keep if e.get("ph") in ("s", "f"))
    doc["traceEvents"] = [e for e in keep if e.get("ph") not in ("s", "f") or ends[(e.get("cat"), e.get("id"))] == 2]
    Path(dst).write_bytes(gzip.compress(json.dumps(doc).encode(), 9))


if sys.argv[1] == "--cut":
    cut(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
    sys.exit(0)

out, active = sys.argv[1], int(sys.argv[2])
dev = "cuda" if torch.cuda.is_available() else "cpu"
torch.manual_seed(0)
model = nn.Sequential(
    nn.Embedding(8192, 256),
    nn.TransformerEncoder(nn.TransformerEncoderLayer(256, 4, 1024, batch_first=True), 4),
    nn.Linear(256, 8192)).to(dev)
ddp = False
if dev == "cuda":
    try:
        import torch.distributed as dist
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1"); os.environ.setdefault("MASTER_PORT", "29511")
        dist.init_process_group("nccl", rank=0, world_size=1)
        model = nn.parallel.DistributedDataParallel(model, bucket_cap_mb=4)
        ddp = True
    except Exception as exc:  # noqa: BLE001
        print("no DDP:", exc)
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
loss_fn = nn.CrossEntropyLoss()
x = torch.randint(0, 8192, (16, 128), device=dev)
y = torch.randint(0, 8192, (16, 128), device=dev)


def step():
    with torch.autocast(dev, dtype=torch.bfloat16):
        logits = model(x)
        loss = loss_fn(logits.float().view(-1, 8192), y.view(-1))
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    return loss


acts = [torch.profiler.ProfilerActivity.CPU] + ([torch.profiler.ProfilerActivity.CUDA] if dev == "cuda" else [])
t = time.time()
with torch.profiler.profile(activities=acts, schedule=torch.profiler.schedule(wait=1, warmup=2, active=active),
                            record_shapes=True, profile_memory=True,
                            on_trace_ready=lambda p: p.export_chrome_trace(out)) as prof:
    for _ in range(active + 3):
        step()
        prof.step()
print(f"ddp={ddp} device={dev} {active} steps profiled, trace {os.path.getsize(out) / 2**20:.0f} MiB in {time.time() - t:.0f} s")
