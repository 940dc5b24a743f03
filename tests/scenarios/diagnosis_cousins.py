"""Cousins of the diagnosis jobs: the same classes of bottleneck in other shapes (another model, another
op, another place in the loop), and two more healthy controls.

Written after the advisor's rules, to check that a rule names its class and not the scenario it was built
on. Like diagnosis_jobs.py (which runs them: ``python diagnosis_jobs.py loader_collate``), nothing here
knows about mlprof.
"""

from __future__ import annotations

import collections
import copy
import gc
import json
import os
import random
import re
import unicodedata
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from diagnosis_common import (RUN, CellRNN, TinyTransformer, epochs, loop_steps, mlp, sequences, token_batches, train,
                              vectors)

__all__ = ["COUSINS"]


# ---------------------------------------------------------------- data loading: a Python collate

class RawText(torch.utils.data.Dataset):
    """Sentences tokenized when read (fixed: tokenized once, when the dataset is built)."""

    def __init__(self, n: int, pretokenize: bool, vocab: int = 1000) -> None:
        rng = random.Random(0)
        self.texts = [" ".join(f"Wörd{rng.randrange(vocab)}," for _ in range(rng.randrange(24, 64)))
                      for _ in range(n)]
        self.vocab = vocab
        self.ids = [self._tokenize(t) for t in self.texts] if pretokenize else None

    def _tokenize(self, text: str) -> list[int]:
        out = []
        for word in text.split():
            word = unicodedata.normalize("NFKD", word).casefold()
            word = re.sub(r"[^\w]", "", word)
            out.append(sum(ord(ch) * 31 ** i for i, ch in enumerate(word)) % self.vocab)
        return out

    def __len__(self) -> int:
        return len(self.texts)

    def __getitem__(self, i: int):
        return (self.ids[i] if self.ids is not None else self._tokenize(self.texts[i])), i % 10


def pad_collate(batch):
    """Pads each sample in Python to the batch's longest."""
    longest = max(len(ids) for ids, _ in batch)
    return (torch.tensor([ids + [0] * (longest - len(ids)) for ids, _ in batch]),
            torch.tensor([label for _, label in batch]))


def loader_collate(fixed: bool, steps: int, out: Path) -> None:
    """A bag-of-words text classifier whose DataLoader (num_workers=0) normalizes and hashes every word of every sentence
    when the sample is read (fixed: tokenized once up front)."""
    data = RawText(2048, pretokenize=fixed)
    if fixed:  # tokenized and padded once; a batch is one indexing op
        longest = max(len(ids) for ids in data.ids)
        tokens = torch.tensor([ids + [0] * (longest - len(ids)) for ids in data.ids])
        labels = torch.arange(len(data)) % 10
        batches = torch.utils.data.BatchSampler(torch.utils.data.RandomSampler(data), 32, drop_last=True)
        loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(tokens, labels), batch_size=None,
                                             num_workers=0, sampler=batches)
    else:
        loader = torch.utils.data.DataLoader(data, batch_size=32, shuffle=True, num_workers=0,
                                             collate_fn=pad_collate)
    model = nn.Sequential(nn.EmbeddingBag(1000, 64, mode="mean"), mlp(width=128, depth=2))  # a bag of words
    train(model, epochs(loader), steps)


# ---------------------------------------------------------------- Python work outside ops

def deepcopy_model(fixed: bool, steps: int, out: Path) -> None:
    """An EMA of the weights kept by deep-copying the whole model after every step (fixed: one copy, updated
    in place)."""
    model = nn.Sequential(*[nn.Linear(384, 384) for _ in range(8)], nn.Linear(384, 10))
    data = ((torch.randn(16, 384), y) for _, y in vectors(16))
    ema = copy.deepcopy(model)

    def update_ema(step: int) -> None:
        nonlocal ema
        with torch.no_grad():
            if fixed:
                torch._foreach_lerp_(list(ema.parameters()), list(model.parameters()), 0.01)
            else:
                snapshot = copy.deepcopy(model)
                for e, s in zip(ema.parameters(), snapshot.parameters()):
                    s.mul_(0.01).add_(e, alpha=0.99)
                ema = snapshot

    train(model, data, steps, after_step=update_ema)


def numpy_metrics(fixed: bool, steps: int, out: Path) -> None:
    """Per-class precision and recall and a precision-recall curve computed every step in Python loops over
    the batch's rows (fixed: a confusion matrix with one np.bincount, the curve with one sort)."""
    model = mlp(width=128, depth=2)
    classes = 10
    it = vectors(512)

    def metrics(logits: torch.Tensor, y: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
        preds, labels = logits.argmax(1).numpy(), y.numpy()
        scores = logits.softmax(1)[:, 0].numpy()
        if fixed:
            order = np.argsort(-scores)
            curve = np.cumsum(labels[order] == 0) / np.arange(1, len(order) + 1)
            return np.bincount(labels * classes + preds, minlength=classes * classes).reshape(classes, classes), curve
        confusion = np.zeros((classes, classes), dtype=np.int64)
        for c in range(classes):
            for p, t in zip(preds.tolist(), labels.tolist()):
                if t == c:
                    confusion[c, p] += 1
        curve = []
        for th in np.linspace(0.0, 1.0, 20).tolist():
            hits = [t == 0 for s, t in zip(scores.tolist(), labels.tolist()) if s >= th]
            curve.append(sum(hits) / max(len(hits), 1))
        return confusion, np.array(curve)

    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for _ in loop_steps(steps):
        x, y = next(it)
        logits = model(x)
        loss = F.cross_entropy(logits, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        metrics(logits.detach(), y)


# ---------------------------------------------------------------- periodic work

def periodic_checkpoint(fixed: bool, steps: int, out: Path) -> None:
    """A 25 MB model saved every 5th step (fixed: at the end)."""
    model = nn.Sequential(*[nn.Linear(1024, 1024) for _ in range(6)], nn.Linear(1024, 10))
    data = ((torch.randn(8, 1024), y) for _, y in vectors(8))
    ckpt = out / "periodic.pt"

    def save(step: int) -> None:
        if not fixed and step % 5 == 4:
            torch.save(model.state_dict(), ckpt)

    train(model, data, steps, after_step=save)


# ---------------------------------------------------------------- tiny-op storms

class ColumnNorm(nn.Module):
    """Standardizes each feature column in a Python loop (fixed: the whole batch at once)."""

    def __init__(self, per_column: bool) -> None:
        super().__init__()
        self.per_column = per_column

    def forward(self, x):
        if not self.per_column:
            return (x - x.mean(0)) / (x.std(0) + 1e-5)
        cols = [(x[:, j] - x[:, j].mean()) / (x[:, j].std() + 1e-5) for j in range(x.shape[1])]
        return torch.stack(cols, dim=1)


def per_feature_norm(fixed: bool, steps: int, out: Path) -> None:
    train(nn.Sequential(ColumnNorm(per_column=not fixed), mlp(width=128, depth=2)), vectors(128), steps)


# ---------------------------------------------------------------- one op leads the step

class PairwiseLoss(nn.Module):
    """A metric-learning head: the distance of every sample to every other, several times (fixed: to 10
    class centroids)."""

    def __init__(self, all_pairs: bool) -> None:
        super().__init__()
        self.all_pairs = all_pairs
        self.body = mlp(width=128, depth=2)
        self.centroids = nn.Parameter(torch.randn(10, 10))

    def forward(self, x):
        z = self.body(x)
        if not self.all_pairs:
            return -torch.cdist(z, self.centroids)
        bank = torch.cat([z] * 8)
        d = torch.cdist(bank, bank)
        return -torch.cdist(z, self.centroids) + 1e-6 * d[: z.shape[0], :10]


def cdist_forward(fixed: bool, steps: int, out: Path) -> None:
    train(PairwiseLoss(all_pairs=not fixed), vectors(256), steps)


# ---------------------------------------------------------------- dtype

def float64_default(fixed: bool, steps: int, out: Path) -> None:
    """torch.set_default_dtype(torch.float64) at the top of the script, so the model and the data it makes are
    double (fixed: the float32 default)."""
    if not fixed:
        torch.set_default_dtype(torch.float64)
    try:
        train(mlp(width=512, depth=3, dtype=torch.get_default_dtype()), vectors(256, torch.get_default_dtype()),
              steps)
    finally:
        torch.set_default_dtype(torch.float32)


# ---------------------------------------------------------------- memory growth

def kept_losses(fixed: bool, steps: int, out: Path) -> None:
    """A transformer's training losses kept as tensors to average later, with ``retain_graph=True`` added
    to silence "Trying to backward through the graph a second time": each kept loss keeps its graph and
    its activations alive (fixed: ``loss.item()``, no retain_graph)."""
    model = TinyTransformer(vocab=1000, dim=64)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    history: list = []
    it = token_batches(16, 64)
    for _ in loop_steps(RUN.get("growth_steps", 150), seconds=0):  # a trend needs the steps after the window
        x, y = next(it)
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward(retain_graph=not fixed)
        opt.step()
        history.append(loss.item() if fixed else loss)


# ---------------------------------------------------------------- garbage collection: the automatic collector

def gc_cycles(fixed: bool, steps: int, out: Path) -> None:
    """No gc.collect() anywhere: a large live heap (a vocabulary of 400K entries, built once) and per-sample
    metadata records kept for a few steps make the automatic collector's full collections walk the whole
    heap every few steps (fixed: gc.freeze() after building the heap, records as arrays)."""
    vocab = {f"tok{i}": (i, [i % 7]) for i in range(400_000)}
    if fixed:
        gc.freeze()
    recent: collections.deque = collections.deque(maxlen=4)

    def keep_records(step: int) -> None:
        if fixed:
            recent.append(np.arange(256 * 60))
        else:
            recent.append([{"sample": i, "aug": [i, i + 1], "meta": {"step": step}} for i in range(256 * 60)])

    train(mlp(), vectors(), steps, after_step=keep_records)
    del vocab


# ---------------------------------------------------------------- fresh large temporaries

def causal_mask(fixed: bool, steps: int, out: Path) -> None:
    """An attention-style causal mask for the longest sequence (4096 x 4096, 64 MB) built in every forward,
    as many model ports do (fixed: built once and kept as a buffer)."""
    model = mlp(width=128, depth=2)
    longest = 4096
    kept = torch.triu(torch.ones(longest, longest), diagonal=1) if fixed else None

    def forward(x):
        mask = kept if fixed else torch.triu(torch.ones(longest, longest), diagonal=1)
        return model(x + mask[: x.shape[0], :64])

    train(model, vectors(), steps, forward=forward)


# ---------------------------------------------------------------- other processes on the cores

def _prepare_forever(seed: int) -> None:
    """A feature-preparation worker that never rests (precomputing augmentations nobody waits for)."""
    rng = np.random.default_rng(seed)
    while True:
        a = rng.standard_normal((256, 256))
        np.linalg.svd(a)


def pool_contention(fixed: bool, steps: int, out: Path) -> None:
    """The script starts a multiprocessing pool of one worker per core that precomputes features flat out
    beside training (fixed: no pool)."""
    import multiprocessing as mp

    pool = None
    if not fixed:
        pool = mp.get_context("fork").Pool(os.cpu_count() or 1)
        for i in range(os.cpu_count() or 1):
            pool.apply_async(_prepare_forever, (i,))
    try:
        train(mlp(width=512, depth=3), vectors(256), steps)
    finally:
        if pool is not None:
            pool.terminate()
            pool.join()


# ---------------------------------------------------------------- Python work outside ops: logging

def param_histograms(fixed: bool, steps: int, out: Path) -> None:
    """TensorBoard-style histograms of every parameter and gradient, computed in NumPy and written to a file
    every step (fixed: every 100th step)."""
    model = mlp(width=512, depth=3)
    log = open(out / "histograms.jsonl", "a")
    try:
        def log_histograms(step: int) -> None:
            if fixed and step % 100:
                return
            record = {}
            for name, p in model.named_parameters():
                for kind, t in (("w", p.detach()), ("g", p.grad)):
                    counts, edges = np.histogram(t.numpy(), bins=64)
                    record[f"{kind}/{name}"] = [counts.tolist(), edges.tolist()]
            log.write(json.dumps(record) + "\n")

        train(model, vectors(128), steps, after_step=log_histograms)
    finally:
        log.close()


# ---------------------------------------------------------------- a slow rank

def slow_rank_data(fixed: bool, steps: int, out: Path) -> None:
    """Two gloo ranks (under torchrun) with DDP; rank 1 reads its shard through a slow Python decode
    (fixed: both ranks decode alike, fast)."""
    import torch.distributed as dist

    dist.init_process_group("gloo")
    try:
        rank = dist.get_rank()
        model = nn.parallel.DistributedDataParallel(mlp(width=128, depth=2))

        def shard():
            for x, y in vectors(4096):
                if rank == 1 and not fixed:  # this shard is stored as text and parsed in Python
                    text = ",".join(f"{v:.4f}" for v in x[:96].flatten().tolist())
                    x = x + 0 * torch.tensor([float(v) for v in text.split(",")][:64])
                yield x, y

        train(model, shard(), steps, seconds=0)  # both ranks stop together
        dist.barrier()
    finally:
        dist.destroy_process_group()


# ---------------------------------------------------------------- healthy controls

def clean_transformer(fixed: bool, steps: int, out: Path) -> None:
    model = TinyTransformer(vocab=1000, dim=64)
    train(model, token_batches(32, 64), steps, opt=torch.optim.AdamW(model.parameters(), lr=1e-3))


def clean_rnn(fixed: bool, steps: int, out: Path) -> None:
    train(CellRNN(per_step_cell=False), sequences(), steps)


COUSINS: dict[str, Callable[[bool, int, Path], None]] = {f.__name__: f for f in (
    loader_collate, deepcopy_model, numpy_metrics, periodic_checkpoint, per_feature_norm, cdist_forward,
    float64_default, kept_losses, gc_cycles, causal_mask, pool_contention, param_histograms, slow_rank_data,
    clean_transformer, clean_rnn)}
