"""A tiny Hugging Face Trainer job: a 2-layer GPT-2 built from a config, synthetic tokens, no downloads.

Imported by the tests (``train``), and run as a script under torchrun with
every setting on the command line (``HfArgumentParser``):

    python -m torch.distributed.run --nproc_per_node=2 hf_job.py --output_dir OUT --max_steps 6 \\
        --use_cpu --mlprof --mlprof_output_dir 'PROF/rank_{id}' --mlprof_start_step 3 --mlprof_active 2

Each rank writes ``OUT/log_history_rank{N}.json`` (what its Trainer logged).
"""

from __future__ import annotations

import json
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")

import torch  # noqa: E402
from transformers import GPT2Config, GPT2LMHeadModel, HfArgumentParser, Trainer, TrainingArguments  # noqa: E402

SEQ_LEN = 32
VOCAB = 128


class Tokens(torch.utils.data.Dataset):
    """Random token sequences; the labels are the inputs (causal LM)."""

    def __len__(self) -> int:
        return 512

    def __getitem__(self, i: int) -> dict:
        ids = torch.randint(0, VOCAB, (SEQ_LEN,), generator=torch.Generator().manual_seed(i))
        return {"input_ids": ids, "labels": ids}


def tiny_gpt2() -> GPT2LMHeadModel:
    torch.manual_seed(0)
    return GPT2LMHeadModel(GPT2Config(n_layer=2, n_embd=64, n_head=2, vocab_size=VOCAB, n_positions=SEQ_LEN))


def training_args(output_dir, **overrides) -> TrainingArguments:
    settings = dict(output_dir=str(output_dir), max_steps=8, per_device_train_batch_size=4, logging_steps=2,
                    report_to=[], save_strategy="no", use_cpu=True, disable_tqdm=True, dataloader_num_workers=0,
                    seed=0)
    settings.update(overrides)
    return TrainingArguments(**settings)


def train(args: TrainingArguments, callbacks: list, eval_dataset=None) -> Trainer:
    trainer = Trainer(model=tiny_gpt2(), args=args, train_dataset=Tokens(), eval_dataset=eval_dataset,
                      callbacks=callbacks)
    trainer.train()
    return trainer


if __name__ == "__main__":
    from mlprof.integrations.transformers import MlprofArguments

    targs, margs = HfArgumentParser((TrainingArguments, MlprofArguments)).parse_args_into_dataclasses()
    trainer = train(targs, margs.callbacks())
    os.makedirs(targs.output_dir, exist_ok=True)
    with open(os.path.join(targs.output_dir, f"log_history_rank{targs.process_index}.json"), "w") as fh:
        json.dump(trainer.state.log_history, fh)
