"""A small transformer language model on synthetic token sequences, profiled with mlprof.

    python examples/transformer_lm.py --steps 20 --out ./result
"""

from __future__ import annotations

import math

import torch
from torch import nn

from _common import parse_args, print_capture_summary, train

VOCAB, CONTEXT = 512, 64


class TinyLM(nn.Module):
    def __init__(self, d_model: int = 128, heads: int = 4, layers: int = 2) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, d_model)
        self.position = nn.Parameter(torch.randn(CONTEXT, d_model) * 0.02)
        block = nn.TransformerEncoderLayer(d_model, heads, dim_feedforward=4 * d_model, dropout=0.1,
                                           batch_first=True, norm_first=True)
        self.blocks = nn.TransformerEncoder(block, layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(d_model)
        self.out = nn.Linear(d_model, VOCAB)
        self.register_buffer("causal", nn.Transformer.generate_square_subsequent_mask(CONTEXT), persistent=False)

    def forward(self, tokens):
        x = self.embed(tokens) * math.sqrt(self.embed.embedding_dim) + self.position[: tokens.shape[1]]
        x = self.blocks(x, mask=self.causal[: tokens.shape[1], : tokens.shape[1]], is_causal=True)
        return self.out(self.norm(x))


def synthetic_batch(generator: torch.Generator, batch_size: int) -> torch.Tensor:
    """Sequences with learnable structure: each token is the previous one plus a per-sequence stride."""
    start = torch.randint(0, VOCAB, (batch_size, 1), generator=generator)
    stride = torch.randint(1, 8, (batch_size, 1), generator=generator)
    return (start + stride * torch.arange(CONTEXT + 1)) % VOCAB


def make_step(batch_size: int = 16):
    torch.manual_seed(0)
    model = TinyLM()
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    generator = torch.Generator().manual_seed(0)

    def step() -> float:
        batch = synthetic_batch(generator, batch_size)
        logits = model(batch[:, :-1])
        loss = nn.functional.cross_entropy(logits.reshape(-1, VOCAB), batch[:, 1:].reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss.item()

    return step


if __name__ == "__main__":
    args = parse_args(__doc__.splitlines()[0], default_steps=20)
    print_capture_summary(train(make_step(), args))
