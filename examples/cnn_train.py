"""A small CNN trained from a DataLoader on synthetic images, profiled with mlprof.

    python examples/cnn_train.py --steps 20 --out ./result
"""

from __future__ import annotations

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

from _common import parse_args, print_capture_summary, train


class SyntheticImages(Dataset):
    """10 classes of 3x32x32 images: class k has a bright patch at a class-specific spot."""

    def __init__(self, size: int = 4096, seed: int = 0) -> None:
        generator = torch.Generator().manual_seed(seed)
        self.labels = torch.randint(0, 10, (size,), generator=generator)
        self.noise = torch.randn(size, 3, 32, 32, generator=generator)

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int):
        label = int(self.labels[index])
        image = self.noise[index].clone()
        row, col = divmod(label, 5)
        image[:, row * 12:row * 12 + 8, col * 6:col * 6 + 6] += 0.6
        return image, label


class SmallCNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        )
        self.head = nn.Sequential(nn.Flatten(), nn.Dropout(0.1), nn.Linear(32 * 8 * 8, 10))

    def forward(self, x):
        return self.head(self.features(x))


def make_step(batch_size: int = 64, num_workers: int = 0):
    """A closure running one training step; the DataLoader restarts when exhausted."""
    torch.manual_seed(0)
    model, loss_fn = SmallCNN(), nn.CrossEntropyLoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    loader = DataLoader(SyntheticImages(), batch_size=batch_size, shuffle=True, num_workers=num_workers)
    batches = iter(loader)

    def step() -> float:
        nonlocal batches
        try:
            images, labels = next(batches)
        except StopIteration:
            batches = iter(loader)
            images, labels = next(batches)
        loss = loss_fn(model(images), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss.item()

    return step


if __name__ == "__main__":
    args = parse_args(__doc__.splitlines()[0], default_steps=20)
    print_capture_summary(train(make_step(), args))
