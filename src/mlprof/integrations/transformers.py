"""Hugging Face Trainer integration: ``MlprofCallback``.

    from mlprof.integrations.transformers import MlprofCallback

    trainer = Trainer(model=model, args=args, train_dataset=data,
                      callbacks=[MlprofCallback(output_dir="./prof", start_step=5, active=3)])

A step is an optimizer step (``state.global_step``; with gradient accumulation,
all of its micro-batches): step N runs from the end of step N-1 to the end of
step N, so it holds the data loading of its micro-batches and, when the
Trainer logs, evaluates or saves after step N-1, that work too. Each rank
(torchrun) writes its own capture. The Trainer's logs (loss, learning rate,
grad norm, its throughput figures, eval metrics) are recorded as scalars at
the step they were logged, with ``samples_per_second`` and
``tokens_per_second`` measured per step on this rank. docs/integrations.md.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Optional

from .. import mstx
from ..collect.trainer_session import TrainerSession, with_output
from ..errors import ConfigError
from ._common import integration_options, never_raises, require

_transformers = require("transformers", "transformers", "transformers")
TrainerCallback = _transformers.TrainerCallback

__all__ = ["MlprofCallback", "MlprofArguments"]

SOURCE = "transformers"


class MlprofCallback(TrainerCallback):
    """Profile chosen steps of a ``transformers.Trainer`` run with mlprof.

    ``start_step`` (counted from 1 like ``global_step``) and ``active`` choose
    the recorded steps; ``options`` are any of ``mlprof run``'s options
    (docs/run.md: ``level``, ``warmup``, ``repeat``, ``record_shapes``,
    ``export_type``, ...). ``config`` reads them from a training config's
    profile section instead (docs/integrations.md). ``output_dir`` defaults to
    ``<TrainingArguments.output_dir>/mlprof``; ``{id}`` in it is the rank.
    With ``analyse`` each window is parsed in a child process after it is
    written. Bad options raise ``mlprof.MlprofError`` here, before training.
    """

    def __init__(self, output_dir: str | os.PathLike | None = None, start_step: int | None = None,
                 active: int | None = None, *, config: str | os.PathLike | Mapping | None = None,
                 analyse: bool = True, **options: Any) -> None:
        self.session: TrainerSession | None = None
        resolved = integration_options(output_dir, start_step, active, config, options)
        self.options = resolved.options
        self.enabled = resolved.enabled
        self._output_given = resolved.output_given
        self.analyse = bool(analyse)
        self._hook: Any = None
        self._input_name = "input_ids"
        self._samples = 0
        self._tokens = 0
        self._eval_range: int | None = None

    # -- Trainer events ---------------------------------------------------------------
    @never_raises
    def on_train_begin(self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any) -> None:
        if not self.enabled:
            return
        options = self.options
        if not self._output_given:
            options = with_output(options, os.path.join(args.output_dir or ".", "mlprof"))
        self.session = TrainerSession(options, integration=SOURCE, analyse=self.analyse)
        self.session.start(state.global_step + 1, rank=args.process_index, metadata={
            "transformers": _transformers.__version__,
            "per_device_train_batch_size": args.per_device_train_batch_size,
            "gradient_accumulation_steps": args.gradient_accumulation_steps,
            "world_size": args.world_size, "max_steps": state.max_steps, "logging_steps": args.logging_steps,
        })
        if self.session.running and model is not None:
            self._count_inputs_of(model)

    @never_raises
    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.session is not None:
            self.session.end_step(self._samples or None, self._tokens or None)
            self._samples = self._tokens = 0

    @never_raises
    def on_log(self, args: Any, state: Any, control: Any, logs: Mapping | None = None, **kwargs: Any) -> None:
        if self.session is not None and logs:
            self.session.log(logs, state.global_step, SOURCE)

    @never_raises
    def on_prediction_step(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        # Evaluation shows as one "evaluate" range on the timeline (it runs inside a step).
        if self.session is not None and self._eval_range is None:
            self._eval_range = mstx.range_start("evaluate")

    @never_raises
    def on_evaluate(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self._eval_range is not None:
            mstx.range_end(self._eval_range)
            self._eval_range = None

    @never_raises
    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._remove_hook()
        if self.session is not None:
            self.session.stop()

    # -- samples and tokens per step ------------------------------------------------------
    def _count_inputs_of(self, model: Any) -> None:
        """A forward pre-hook counting each training micro-batch's samples (and tokens, for input_ids)."""
        self._input_name = getattr(model, "main_input_name", "input_ids") or "input_ids"
        self._hook = model.register_forward_pre_hook(self._count_inputs, with_kwargs=True)

    def _count_inputs(self, module: Any, args: tuple, kwargs: dict) -> None:
        try:
            if not module.training:
                return None
            batch = kwargs.get(self._input_name) if kwargs else None
            if batch is None and args:
                batch = args[0]
            shape = getattr(batch, "shape", None)
            if shape:
                self._samples += int(shape[0])
                # Tokens: the elements of input_ids, padding included (as the Trainer's own count "all").
                if self._input_name == "input_ids" and len(shape) >= 2:
                    self._tokens += int(batch.numel())
        except Exception:  # noqa: BLE001 - counting must never break a forward pass
            pass
        return None

    def _remove_hook(self) -> None:
        hook, self._hook = self._hook, None
        if hook is not None:
            hook.remove()


@dataclass
class MlprofArguments:
    """mlprof's switches as command-line flags beside ``TrainingArguments`` (``HfArgumentParser``).

        parser = HfArgumentParser((TrainingArguments, MlprofArguments))
        training_args, mlprof_args = parser.parse_args_into_dataclasses()
        trainer = Trainer(..., callbacks=mlprof_args.callbacks())

        python train.py --output_dir out --mlprof --mlprof_start_step 5 --mlprof_active 3 \
            --mlprof_options '{"level": "Level1"}'
    """

    # Optional[...] rather than "X | None": HfArgumentParser reads these hints on Python 3.10 too.
    mlprof: bool = field(default=False, metadata={"help": "profile chosen steps with mlprof (MlprofCallback)"})
    mlprof_output_dir: Optional[str] = field(  # noqa: UP007
        default=None, metadata={"help": "where captures go ({id}: the rank); default <output_dir>/mlprof"})
    mlprof_start_step: Optional[int] = field(  # noqa: UP007
        default=None, metadata={"help": "first profiled optimizer step, counted from 1 (default 7)"})
    mlprof_active: Optional[int] = field(default=None, metadata={"help": "steps profiled (default: auto, until the window holds enough steps)"})  # noqa: UP007
    mlprof_config: Optional[str] = field(  # noqa: UP007
        default=None, metadata={"help": "a training config (YAML/JSON) whose profile section sets everything"})
    mlprof_options: Optional[str] = field(  # noqa: UP007
        default=None, metadata={"help": "any other mlprof option as JSON, e.g. '{\"level\": \"Level1\"}'"})

    def callbacks(self) -> list[MlprofCallback]:
        """``[MlprofCallback(...)]`` with these flags, or ``[]`` without ``--mlprof`` (or ``--mlprof_config``)."""
        if not self.mlprof and self.mlprof_config is None:
            return []
        try:
            options = json.loads(self.mlprof_options) if self.mlprof_options else {}
        except ValueError as exc:
            raise ConfigError(f"--mlprof_options: not valid JSON: {exc}") from None
        if not isinstance(options, dict):
            raise ConfigError("--mlprof_options: expected a JSON object of mlprof options")
        analyse = options.pop("analyse", True)  # the callback's own switch, allowed here too
        return [MlprofCallback(self.mlprof_output_dir, self.mlprof_start_step, self.mlprof_active,
                               config=self.mlprof_config, analyse=analyse, **options)]
