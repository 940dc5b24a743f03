"""Ordinary CPU training loops, each with one bottleneck and its fixed twin, for the diagnosis benchmark.

    python diagnosis_jobs.py SCENARIO [--fixed] [--steps N] [--seconds S] [--threads N] [--out DIR]

Nothing here knows about mlprof: these are "unmodified user scripts" run under
`mlprof run`. Each scenario is a small, real training loop (an MLP, a small
CNN, a small transformer / embedding model or an RNN) with one known
bottleneck; ``--fixed`` runs its twin, the same loop with that one thing
fixed (and measurably faster). ``clean_mlp`` and ``clean_cnn`` are healthy
controls; they ignore ``--fixed``.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F

from diagnosis_busy import start_busy, stop_busy  # sibling files: no mlprof
from diagnosis_cousins import COUSINS
from diagnosis_common import (RUN, CellRNN, RowDropout, SmallCNN, SortPooled, TinyTransformer, WhitenedMLP, epochs, images,
                              loop_steps, mlp, sequences, token_batches, train, vectors)

CORES = os.cpu_count() or 1
torch.manual_seed(0)


# ---------------------------------------------------------------- scenarios
# Each takes (fixed, steps, out) and runs the bottleneck, or its twin when fixed.

def clean_mlp(fixed: bool, steps: int, out: Path) -> None:
    train(mlp(), vectors(), steps)


def clean_cnn(fixed: bool, steps: int, out: Path) -> None:
    train(SmallCNN(), images(), steps)


class AugmentedImages(torch.utils.data.Dataset):
    """Images augmented on the fly in ``__getitem__`` (a slow pure-Python jitter), or precomputed once."""

    def __init__(self, n: int, precompute: bool) -> None:
        g = torch.Generator().manual_seed(0)
        self.raw = torch.randn(n, 3, 16, 16, generator=g)
        self.labels = torch.randint(0, 10, (n,), generator=g)
        self.precomputed = torch.stack([self._augment(i) for i in range(n)]) if precompute else None

    def _augment(self, i: int) -> torch.Tensor:
        img = self.raw[i]
        rows = [img[:, r].roll(r % 3, dims=-1) * (1.0 + 0.01 * r) for r in range(img.shape[1])]
        noise = sum(((j * 7919) % 13) / 1000.0 for j in range(3000))
        return torch.stack(rows, dim=1) + noise

    def __len__(self) -> int:
        return len(self.raw)

    def __getitem__(self, i):
        if isinstance(i, list):  # a whole batch of indices (the fixed twin's batched loading)
            return self.precomputed[i], self.labels[i]
        img = self.precomputed[i] if self.precomputed is not None else self._augment(i)
        return img, self.labels[i]


def loader_getitem(fixed: bool, steps: int, out: Path) -> None:
    batch = 32
    data = AugmentedImages(batch * (steps + 1), precompute=fixed)
    if fixed:  # augmented once, and a batch is one indexing op instead of 32 items collated
        batches = torch.utils.data.BatchSampler(torch.utils.data.SequentialSampler(data), batch, drop_last=True)
        loader = torch.utils.data.DataLoader(data, batch_size=None, sampler=batches, num_workers=0)
    else:
        loader = torch.utils.data.DataLoader(data, batch_size=batch, num_workers=0)
    train(SmallCNN(8), epochs(loader), steps)


def per_sample(fixed: bool, steps: int, out: Path) -> None:
    model = mlp(width=128, depth=2)
    if fixed:
        train(model, vectors(128), steps)
    else:
        train(model, vectors(128), steps,
              forward=lambda x: torch.stack([model(x[i:i + 1])[0] for i in range(x.shape[0])]))


def per_sample_cnn(fixed: bool, steps: int, out: Path) -> None:
    """A conv net applied one image at a time, 64 images a step, in a for loop that appends each output
    (fixed: the batch in one call)."""
    model = SmallCNN(8)

    def forward(x):
        if fixed:
            return model(x)
        out = []
        for i in range(x.shape[0]):
            out.append(model(x[i:i + 1]))
        return torch.cat(out)

    train(model, images(64, 16), steps, forward=forward)


class GeluBlock(nn.Module):
    """Linear, LayerNorm and GELU twice: other ops than per_sample's Linear and ReLU."""

    def __init__(self, width: int = 96) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(64, width), nn.LayerNorm(width), nn.GELU(),
                                  nn.Linear(width, width), nn.LayerNorm(width), nn.GELU(), nn.Linear(width, 10))

    def forward(self, x):
        return self.body(x)


def per_sample_list(fixed: bool, steps: int, out: Path) -> None:
    """The batch split into a list of 64 tensors and a list comprehension over it (fixed: torch.stack of the
    list, one call)."""
    model = GeluBlock()

    def forward(x):
        samples = list(x.unbind(0))
        if fixed:
            return model(torch.stack(samples))
        return torch.cat([model(s.unsqueeze(0)) for s in samples])

    train(model, vectors(64), steps, forward=forward)


def row_dropout(fixed: bool, steps: int, out: Path) -> None:
    model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Dropout(0.5) if fixed else RowDropout(),
                          nn.Linear(256, 10))
    train(model, vectors(256), steps)


def rnn_cell_loop(fixed: bool, steps: int, out: Path) -> None:
    train(CellRNN(per_step_cell=not fixed), sequences(), steps)


def checkpoint_every_step(fixed: bool, steps: int, out: Path) -> None:
    model = nn.Sequential(*[nn.Linear(512, 512) for _ in range(6)], nn.Linear(512, 10))
    data = ((torch.randn(16, 512), y) for _, y in vectors(16))
    ckpt = out / "ckpt.pt"

    def save(step: int) -> None:
        if not fixed:
            torch.save(model.state_dict(), ckpt)

    train(model, data, steps, after_step=save)
    if fixed:
        torch.save(model.state_dict(), ckpt)  # once, after training


def gc_storm(fixed: bool, steps: int, out: Path) -> None:
    """gc.collect() after every step (to "free memory") while a large live heap of Python objects (a
    dataset's index, built once) makes every full collection walk it (fixed: no collect in the loop, and
    the index frozen out of the collector's way)."""
    index = [{"id": i, "path": f"img_{i:07d}.jpg", "label": i % 10} for i in range(600_000)]

    def collect(step: int) -> None:
        if not fixed:
            gc.collect()

    if fixed:
        gc.freeze()
    train(mlp(), vectors(), steps, after_step=collect)
    del index


def float64_model(fixed: bool, steps: int, out: Path) -> None:
    dtype = torch.float32 if fixed else torch.float64
    train(SmallCNN(16).to(dtype), images(32, 32, dtype), steps)


def sleep_in_loop(fixed: bool, steps: int, out: Path) -> None:
    def throttle(step: int) -> None:
        if not fixed:
            time.sleep(0.03)  # a "rate limiter" left in from debugging

    train(mlp(width=128, depth=2), vectors(), steps, after_step=throttle)


def log_io(fixed: bool, steps: int, out: Path) -> None:
    model = SmallCNN(8)
    log = open(out / "train_log.jsonl", "a")
    try:
        def log_stats(step: int) -> None:
            if fixed:
                return
            # Per-parameter statistics written and fsynced every step.
            for name, p in model.named_parameters():
                for row in p.detach().reshape(p.shape[0], -1).tolist():
                    log.write(json.dumps({"step": step, "param": name, "values": row}) + "\n")
                log.flush()
                os.fsync(log.fileno())

        train(model, images(16, 16), steps, after_step=log_stats)
    finally:
        log.close()


def item_loop(fixed: bool, steps: int, out: Path) -> None:
    model = mlp(width=128, depth=2)
    history: list[float] = []

    def forward(x):
        logits = model(x)
        if fixed:
            history.append(float(logits.detach().abs().mean()))
        else:  # a per-element Python loop over a large tensor, one .item() per value
            flat = logits.detach().flatten()
            history.append(sum(abs(flat[i].item()) for i in range(flat.numel())) / flat.numel())
        return logits

    train(model, vectors(256), steps, forward=forward)


def memory_churn(fixed: bool, steps: int, out: Path) -> None:
    model = mlp(width=128, depth=2)
    numel = 16_000_000  # 64 MB: above the allocator's reuse, so every fresh tensor is new pages
    bank = torch.zeros(numel) if fixed else None

    def forward(x):
        # A large "feature bank" of which each step fills a slice: a fresh zeroed one per step, or one reused.
        nonlocal bank
        if not fixed:
            bank = torch.zeros(numel)
        bank[:x.numel()].copy_(x.flatten())
        return model(x + bank[:64])

    train(model, vectors(), steps, forward=forward)


def cpu_contention(fixed: bool, steps: int, out: Path) -> None:
    busy = None if fixed else start_busy(2 * CORES, seconds=60, same_session=True)
    try:
        train(mlp(width=512, depth=3), vectors(256), steps)
    finally:
        if busy:
            stop_busy(busy)


def oversubscription(fixed: bool, steps: int, out: Path) -> None:
    threads = CORES if fixed else 8 * CORES
    torch.set_num_threads(threads)
    os.environ["OMP_NUM_THREADS"] = str(threads)
    train(mlp(width=256, depth=6), vectors(64), steps)  # many mid-sized ops: one parallel region each


def dynamic_shapes(fixed: bool, steps: int, out: Path) -> None:
    model = TinyTransformer()
    g = torch.Generator().manual_seed(1)

    def batches():
        while True:
            # Unbucketed: every batch a different size and sequence length (up to 192 tokens).
            b, seq = (32, 48) if fixed else (int(torch.randint(8, 48, (1,), generator=g)),
                                              int(torch.randint(16, 192, (1,), generator=g)))
            yield torch.randint(0, 1000, (b, seq), generator=g), torch.randint(0, 10, (b,), generator=g)

    train(model, batches(), steps)


def optimizer_loop(fixed: bool, steps: int, out: Path) -> None:
    """164 small parameter tensors (40 Linear+LayerNorm blocks, width 64) updated by Adam's per-tensor
    Python loop (fixed: foreach=True, one multi-tensor call per update)."""
    model = nn.Sequential(*[nn.Sequential(nn.Linear(64, 64), nn.LayerNorm(64)) for _ in range(40)],
                          nn.Linear(64, 10))
    train(model, vectors(1024), steps, opt=torch.optim.Adam(model.parameters(), lr=1e-3, foreach=fixed))


def hf_dynamic_seq(fixed: bool, steps: int, out: Path) -> None:
    """A tiny GPT-2 (built from a config, nothing downloaded), compiled with static shapes
    (``torch.compile(dynamic=False)``, as for CUDA graphs or max-autotune) and called as Hugging Face code
    calls it, ``model(input_ids=..., labels=...)``, on batches padded to their own longest sequence: every
    new length recompiles (fixed: every batch padded to one length, one graph). Without torch.compile the
    varying lengths cost a CPU nothing but their own work: an earlier eager version's twin was slower than
    it in every run. ``backend="eager"``: dynamo's recompiles, without waiting for C++ compiles."""
    from transformers import GPT2Config, GPT2LMHeadModel

    model = GPT2LMHeadModel(GPT2Config(vocab_size=500, n_positions=256, n_embd=64, n_layer=2, n_head=4))
    compiled = torch.compile(model, backend="eager", dynamic=False)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(2)
    for _ in loop_steps(steps):
        seq = 128 if fixed else int(torch.randint(16, 256, (1,), generator=g))
        ids = torch.randint(0, 500, (8, seq), generator=g)
        loss = compiled(input_ids=ids, labels=ids).loss
        opt.zero_grad()
        loss.backward()
        opt.step()


_STEP = {"n": 0}  # the loop's step counter, read by the compiled loss below


def compile_recompiles(fixed: bool, steps: int, out: Path) -> None:
    """A torch.compile'd loss reads a Python number that changes every step (a warm-up factor from the
    global step): dynamo guards on its value and recompiles every step, up to its cache limit (fixed: the
    factor is passed as a tensor, one graph). ``backend="eager"``: the recompiles are dynamo's, the same
    with inductor, without waiting for C++ compiles."""
    model = mlp()

    @torch.compile(backend="eager")
    def loss_of(x, y, factor=None):
        scale = factor if factor is not None else min(1.0, (_STEP["n"] + 1) / 100)
        return F.cross_entropy(model(x), y) * scale

    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    it = vectors()
    for step in loop_steps(steps):
        _STEP["n"] = step
        x, y = next(it)
        loss = loss_of(x, y, torch.tensor(min(1.0, (step + 1) / 100))) if fixed else loss_of(x, y)
        opt.zero_grad()
        loss.backward()
        opt.step()


def eval_every_3(fixed: bool, steps: int, out: Path) -> None:
    model = SmallCNN(8)
    val = [next(images(64, 32)) for _ in range(6)]

    def evaluate() -> None:
        with torch.no_grad():
            for x, _ in val:
                model(x)

    train(model, images(16, 32), steps, after_step=lambda s: None if fixed or s % 3 else evaluate())
    if fixed:
        evaluate()  # once, at the end


def linalg_forward(fixed: bool, steps: int, out: Path) -> None:
    train(WhitenedMLP(recompute=not fixed), vectors(256), steps)


def sort_forward(fixed: bool, steps: int, out: Path) -> None:
    train(SortPooled(use_sort=not fixed), token_batches(32, 128, 5000), steps)


def slow_rank(fixed: bool, steps: int, out: Path) -> None:
    """Two gloo ranks (under torchrun) with DDP; rank 1 also does an extra preprocessing pass."""
    import torch.distributed as dist

    dist.init_process_group("gloo")
    try:
        rank = dist.get_rank()
        model = nn.parallel.DistributedDataParallel(mlp(width=128, depth=2))
        extra = nn.Linear(64, 64)

        def forward(x):
            if rank == 1 and not fixed:
                with torch.no_grad():  # a feature pass only this rank's data needs
                    for _ in range(20):
                        x = torch.tanh(extra(x)) + x
            return model(x)

        # Compute well above the gradient all-reduce; a step count, not a time: both ranks stop together.
        train(model, vectors(8192), steps, forward=forward, seconds=0)
        # Both ranks done before the group goes: without it, gloo's teardown aborted one rank in about one
        # run in four on this host ("terminate called without an active exception"), mlprof or not.
        dist.barrier()
    finally:
        dist.destroy_process_group()


def anomaly_mlp(fixed: bool, steps: int, out: Path) -> None:
    """torch.autograd.set_detect_anomaly(True) left on from debugging a NaN (fixed: off)."""
    torch.autograd.set_detect_anomaly(not fixed)
    try:
        train(mlp(width=256, depth=4), vectors(128), steps)
    finally:
        torch.autograd.set_detect_anomaly(False)


def anomaly_transformer(fixed: bool, steps: int, out: Path) -> None:
    """The loop wrapped in ``with torch.autograd.detect_anomaly():`` (a transformer: many small graph nodes
    per step; fixed: no context)."""
    model = TinyTransformer()
    if fixed:
        train(model, token_batches(16, 32), steps)
        return
    with torch.autograd.detect_anomaly():
        train(model, token_batches(16, 32), steps)


class ResBlock(nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)

    def forward(self, x):
        return F.relu(x + self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x))))))


def anomaly_cnn_no_nan_check(fixed: bool, steps: int, out: Path) -> None:
    """Anomaly detection with ``check_nan=False`` (tracebacks only) switched on inside the loop, after a
    warm-up, around a small ResNet (conv-bn-relu blocks with residual adds) with AdamW (fixed: never
    switched on)."""
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), *[ResBlock(8) for _ in range(4)],
                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 10))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    it = images(16, 16)
    for step in loop_steps(steps):
        if step == 1 and not fixed:
            torch.autograd.set_detect_anomaly(True, check_nan=False)
        x, y = next(it)
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    torch.autograd.set_detect_anomaly(False)


def deterministic_mlp(fixed: bool, steps: int, out: Path) -> None:
    """A healthy MLP with torch.use_deterministic_algorithms(True) (costless on a CPU) and a debug variable
    set: a control, worth info findings only."""
    os.environ["TORCH_SHOW_CPP_STACKTRACES"] = "1"
    torch.use_deterministic_algorithms(True)
    train(mlp(), vectors(), steps)
# ---------------------------------------------------------------- growth across steps
# These loops get worse with every step: memory that is never given back, work that grows with what was kept.
# A trend needs steps: the profiled window's for the work, and the steps after it (the profiler off) for the
# process's memory, so each runs at least GROWTH_STEPS steps whatever --steps says (--growth-steps sets it:
# a test with a 5-step window needs 60).
GROWTH_STEPS = 150  # the default window (>= 20 steps and 2 s) leaves steps after it to judge memory by


def _growth_steps(steps: int) -> int:
    return max(steps, RUN.get("growth_steps", GROWTH_STEPS))


def kept_eval_loss(fixed: bool, steps: int, out: Path) -> None:
    """A held-out loss computed every step for the logs with autograd on and kept as a tensor: each kept
    loss holds its graph, and so the forward's activations, alive (fixed: no_grad and .item())."""
    model = mlp(width=1024, depth=2)
    val_x, val_y = torch.randn(512, 64), torch.randint(0, 10, (512,))
    val_losses: list = []

    def log_val(step: int) -> None:
        if fixed:
            with torch.no_grad():
                val_losses.append(F.cross_entropy(model(val_x), val_y).item())
        else:
            val_losses.append(F.cross_entropy(model(val_x), val_y))

    train(model, vectors(256), _growth_steps(steps), after_step=log_val, seconds=0)


def step_feature_cache(fixed: bool, steps: int, out: Path) -> None:
    """Feature maps cached in a dict keyed by step "for later inspection" (a CNN): every entry, and the graph
    behind it, stays alive (fixed: a bounded cache of the last two steps' detached features)."""
    model = SmallCNN(32)
    cache: dict[int, torch.Tensor] = {}

    def forward(x):
        feats = F.relu(model.conv1(x))
        step = forward.calls
        forward.calls += 1
        cache[step] = feats.detach() if fixed else feats
        if fixed:
            cache.pop(step - 2, None)
        x = F.relu(model.conv2(F.max_pool2d(feats, 2)))
        return model.head(x.mean(dim=(2, 3)))

    forward.calls = 0
    train(model, images(64, 32), _growth_steps(steps), forward=forward, seconds=0)


def cat_buffer(fixed: bool, steps: int, out: Path) -> None:
    """Every batch's embeddings concatenated onto a running buffer to normalise by their running mean: the
    torch.cat copies the whole buffer each step (fixed: a running sum and count)."""
    model = mlp(width=256, depth=2)
    embed = nn.Linear(64, 64)
    seen = torch.zeros(0, 64)
    total, count = torch.zeros(64), 0

    def forward(x):
        nonlocal seen, total, count
        with torch.no_grad():
            e = embed(x).repeat(16, 1)  # 4096 rows: 1 MB a step
            if fixed:
                total, count = total + e.sum(0), count + e.shape[0]
                mean = total / count
            else:
                seen = torch.cat([seen, e])
                mean = seen.mean(0)
        return model(x - mean)

    train(model, vectors(256), _growth_steps(steps), forward=forward, seconds=0)


def list_scan(fixed: bool, steps: int, out: Path) -> None:
    """Sample ids checked for repeats against a Python list of every id seen so far: the scan grows with
    every step (fixed: a set)."""
    model = mlp(width=256, depth=2)
    seen: list[int] | set[int] = set() if fixed else []
    ids = iter(range(10**9))

    def check_repeats(step: int) -> None:
        batch_ids = [next(ids) for _ in range(256)]
        repeats = sum(1 for i in batch_ids if i in seen)
        if repeats:
            raise RuntimeError("repeated samples")
        if fixed:
            seen.update(batch_ids)
        else:
            seen.extend(batch_ids)

    train(model, vectors(256), _growth_steps(steps), after_step=check_repeats, seconds=0)


def clean_long(fixed: bool, steps: int, out: Path) -> None:
    """A healthy loop as long as the growth cases and as wide as kept_eval_loss: its memory rises
    in the first steps (allocator caches, Adam's state) and then stays flat."""
    model = mlp(width=1024, depth=2)
    train(model, vectors(256), _growth_steps(steps), opt=torch.optim.Adam(model.parameters(), lr=1e-3), seconds=0)


SCENARIOS: dict[str, Callable[[bool, int, Path], None]] = {f.__name__: f for f in (
    clean_mlp, clean_cnn, loader_getitem, per_sample, per_sample_cnn, per_sample_list, row_dropout, rnn_cell_loop, checkpoint_every_step,
    gc_storm, float64_model, sleep_in_loop, log_io, item_loop, memory_churn, cpu_contention, oversubscription,
    dynamic_shapes, hf_dynamic_seq, optimizer_loop, compile_recompiles, eval_every_3, linalg_forward, sort_forward, slow_rank,
    anomaly_mlp, anomaly_transformer, anomaly_cnn_no_nan_check, deterministic_mlp,
    kept_eval_loss, step_feature_cache, cat_buffer, list_scan, clean_long)} | COUSINS


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scenario", choices=sorted(SCENARIOS))
    parser.add_argument("--fixed", action="store_true", help="run the fixed twin")
    parser.add_argument("--steps", type=int, default=RUN["steps"], help="run at least this many steps")
    parser.add_argument("--seconds", type=float, default=RUN["seconds"],
                        help="and at least this long (the growth scenarios run their own step count)")
    parser.add_argument("--out", type=Path, default=None, help="where a scenario writes files (default: a temp dir)")
    parser.add_argument("--threads", type=int, default=1,
                        help="intra-op threads, 0: torch's default (oversubscription sets its own)")
    parser.add_argument("--growth-steps", type=int, default=GROWTH_STEPS,
                        help="the least steps a growth scenario runs (default %(default)s)")
    args = parser.parse_args()
    RUN.update(steps=args.steps, seconds=args.seconds, growth_steps=args.growth_steps)
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.out is None:
        with tempfile.TemporaryDirectory() as tmp:
            SCENARIOS[args.scenario](args.fixed, args.steps, Path(tmp))
    else:
        args.out.mkdir(parents=True, exist_ok=True)
        SCENARIOS[args.scenario](args.fixed, args.steps, args.out)


if __name__ == "__main__":
    main()
