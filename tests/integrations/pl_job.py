"""A tiny Lightning job: an MLP classifier on synthetic data (CPU, no downloads)."""

from __future__ import annotations

import torch
import lightning as L

BATCH = 8


class TinyModule(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 2))

    def _loss(self, batch):
        x, y = batch
        return torch.nn.functional.cross_entropy(self.net(x), y)

    def training_step(self, batch, batch_idx):
        loss = self._loss(batch)
        self.log("train_loss", loss)
        return loss

    def validation_step(self, batch, batch_idx):
        self.log("val_loss", self._loss(batch))

    def test_step(self, batch, batch_idx):
        self.log("test_loss", self._loss(batch))

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


def loader(n: int = 256) -> torch.utils.data.DataLoader:
    g = torch.Generator().manual_seed(0)
    data = torch.utils.data.TensorDataset(torch.randn(n, 16, generator=g), torch.randint(0, 2, (n,), generator=g))
    return torch.utils.data.DataLoader(data, batch_size=BATCH)


def trainer(profiler, log_dir, **overrides) -> L.Trainer:
    settings = dict(max_steps=6, accelerator="cpu", devices=1, enable_checkpointing=False, enable_progress_bar=False,
                    enable_model_summary=False, log_every_n_steps=1,
                    logger=L.pytorch.loggers.CSVLogger(str(log_dir), name="logs"))
    settings.update(overrides)
    torch.manual_seed(0)
    return L.Trainer(profiler=profiler, **settings)


if __name__ == "__main__":
    # Under torchrun: python -m torch.distributed.run --nproc_per_node=2 pl_job.py OUT PROF
    import sys

    from mlprof.integrations.lightning import MlprofProfiler

    out, prof = sys.argv[1], sys.argv[2]
    profiler = MlprofProfiler(dirpath=prof + "/rank_{id}", start_step=2, active=2, analyse=False, host_sys="",
                              python_sampling=False)
    trainer(profiler, out, strategy="ddp", devices=2, max_steps=4, limit_val_batches=0).fit(TinyModule(), loader())
