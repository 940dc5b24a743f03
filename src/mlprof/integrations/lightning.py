"""PyTorch Lightning integration: ``MlprofProfiler``, a ``lightning.pytorch.profilers.Profiler``.

    from mlprof.integrations.lightning import MlprofProfiler

    trainer = Trainer(profiler=MlprofProfiler(dirpath="./prof", start_step=5, active=3))

Each stage the Trainer runs (``fit``, ``validate``, ``test``, ``predict``) is
a capture of its own (``{host}_{pid}_{stage}_{time}_mlprof``). In ``fit`` a
step is an optimizer step (``trainer.global_step``; with
``accumulate_grad_batches``, all of its batches), in the other stages one
batch. Every action Lightning reports to its profiler (hooks, ``optimizer_step``,
``backward``, ``train_dataloader_next``, ...) is an mstx range on the
timeline, and the validation loop inside ``fit`` is marked as one
``validation`` range. The metrics the Trainer logs (``self.log``) are recorded
as scalars, with ``samples_per_second`` measured per step on this rank.
docs/integrations.md.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping
from typing import Any

from .. import mstx
from ..collect.failsafe import log_failure
from ..collect.trainer_session import TrainerSession, with_output
from ._common import FALLBACK_OUTPUT, integration_options, never_raises, require

_lightning = require("lightning", "lightning", "lightning")
_profilers = require("lightning.pytorch.profilers", "lightning", "lightning")
_data = require("lightning.pytorch.utilities.data", "lightning", "lightning")
_apply_func = require("lightning.fabric.utilities.apply_func", "lightning", "lightning")

__all__ = ["MlprofProfiler"]


SOURCE = "lightning"
STAGES = ("fit", "validate", "test", "predict")
# The strategy hook that ends one batch of an evaluation stage: its step boundary.
_EVAL_STEP = {"validate": "validation_step", "test": "test_step", "predict": "predict_step"}


class MlprofProfiler(_profilers.Profiler):
    """Profile chosen steps of a Lightning ``Trainer`` with mlprof.

    ``dirpath`` is where captures go (default: the Trainer's log dir, as
    Lightning's own profilers; ``{id}`` in it is the rank). ``start_step``
    (counted from 1 like ``global_step`` after the step) and ``active`` choose
    the recorded steps; ``options`` are any of ``mlprof run``'s options
    (docs/run.md); ``config`` reads them from a training config's profile
    section instead. ``stages`` are the Trainer stages profiled. With
    ``analyse`` each window is parsed in a child process after it is written.
    Bad options raise ``mlprof.MlprofError`` here, before training.
    """

    def __init__(self, dirpath: str | os.PathLike | None = None, filename: str | None = None,
                 start_step: int | None = None, active: int | None = None, *,
                 config: str | os.PathLike | Mapping | None = None, stages: tuple[str, ...] = STAGES,
                 analyse: bool = True, **options: Any) -> None:
        super().__init__(dirpath=dirpath, filename=filename)
        # Set first: Lightning's __del__ tears down even a profiler whose options were refused.
        self.session: TrainerSession | None = None
        self._wrapped_connector: Any = None
        self._ranges: dict[str, list[int]] = {}
        self._validation_range: int | None = None
        resolved = integration_options(dirpath, start_step, active, config, options)
        unknown = [s for s in stages if s not in STAGES]
        if unknown:
            from ..errors import ConfigError

            raise ConfigError(f"stages: {', '.join(map(repr, unknown))} not among {', '.join(STAGES)}")
        self.options = resolved.options
        self.enabled = resolved.enabled
        self._output_given = resolved.output_given
        self.stages = tuple(stages)
        self.analyse = bool(analyse)
        self._trainer: Any = None
        self._samples = 0
        self._seen_global_step = 0
        self._last_capture: str | None = None

    # -- Lightning's Profiler interface -------------------------------------------------------
    def setup(self, stage: str, local_rank: int | None = None, log_dir: str | None = None) -> None:
        super().setup(stage, local_rank, log_dir)
        self._open(str(getattr(stage, "value", stage)), log_dir)

    @never_raises
    def _open(self, stage: str, log_dir: str | None) -> None:
        self._stage = stage
        module = getattr(self, "_lightning_module", None)
        if not self.enabled or stage not in self.stages or module is None:
            return
        trainer = module.trainer
        options = self.options
        if not self._output_given:
            options = with_output(options, self.dirpath or log_dir or FALLBACK_OUTPUT)
        self.session = TrainerSession(options, integration=SOURCE, analyse=self.analyse, stage=stage)
        self._trainer = trainer
        self._samples = 0
        self._seen_global_step = trainer.global_step
        first = trainer.global_step + 1 if stage == "fit" else 1
        self.session.start(first, rank=trainer.global_rank, metadata={
            "lightning": _lightning.__version__, "world_size": trainer.world_size,
            "accumulate_grad_batches": trainer.accumulate_grad_batches, "max_steps": trainer.max_steps,
            "log_every_n_steps": trainer.log_every_n_steps})
        if self.session.running:
            self._last_capture = str(self.session.capture_dir)
            self._record_logged_metrics(trainer)

    @never_raises
    def start(self, action_name: str) -> None:
        session = self.session
        if session is None or not session.running:
            return
        self._ranges.setdefault(action_name, []).append(mstx.range_start(action_name))
        if (self._stage == "fit" and self._validation_range is None and action_name.startswith("[LightningModule]")
                and action_name.endswith(".on_validation_start")):
            self._validation_range = mstx.range_start("validation")

    @never_raises
    def stop(self, action_name: str) -> None:
        session = self.session
        if session is None or not session.running:
            return
        opened = self._ranges.get(action_name)
        if opened:
            mstx.range_end(opened.pop())
        if self._validation_range is not None and action_name.startswith("[LightningModule]") \
                and action_name.endswith(".on_validation_end"):
            mstx.range_end(self._validation_range)
            self._validation_range = None
        if self._stage == "fit":
            if action_name == "run_training_batch":
                self._count_batch()
                step = self._trainer.global_step
                if step > self._seen_global_step:  # the optimizer stepped: the step has ended
                    self._seen_global_step = step
                    session.end_step(self._samples or None)
                    self._samples = 0
        elif action_name.startswith("[Strategy]") and action_name.endswith("." + _EVAL_STEP[self._stage]):
            self._count_batch()
            session.end_step(self._samples or None)
            self._samples = 0

    def summary(self) -> str:
        if self._last_capture is None:
            return ""
        return f"mlprof: {self._stage} capture in {self._last_capture}"

    def teardown(self, stage: str | None) -> None:
        self._close()
        super().teardown(stage)

    def _close(self) -> None:
        try:
            self._unwrap_connector()
            session, self.session = self.session, None
            if session is not None:
                session.stop()
        except Exception as exc:  # noqa: BLE001 - Lightning's own teardown must still run
            log_failure("teardown", exc, owner="MlprofProfiler", consequence="")
        self._ranges.clear()
        self._validation_range = None
        self._trainer = None

    # -- what the Trainer logs ------------------------------------------------------------------
    def _record_logged_metrics(self, trainer: Any) -> None:
        """Wrap the Trainer's own ``log_metrics`` (what its loggers receive), on this Trainer only."""
        connector = getattr(trainer, "_logger_connector", None)
        original = getattr(connector, "log_metrics", None)
        if original is None:
            return
        profiler = self

        def log_metrics(metrics: Any, step: int | None = None) -> None:
            profiler._log(metrics)
            return original(metrics, step)

        connector.log_metrics = log_metrics
        self._wrapped_connector = connector

    def _log(self, metrics: Any) -> None:
        session = self.session
        if session is None or not session.running or not metrics:
            return
        try:
            values = _apply_func.convert_tensors_to_scalars(dict(metrics))
        except Exception:  # noqa: BLE001 - a metric we cannot read is not worth a failed run
            return
        # The step a value belongs to: the optimizer steps done when it was logged
        # (Lightning's loggers write global_step - 1 for per-step values); a batch in eval stages.
        step = self._trainer.global_step if self._stage == "fit" else session.last_step
        session.log(values, step, SOURCE)

    def _unwrap_connector(self) -> None:
        connector, self._wrapped_connector = self._wrapped_connector, None
        if connector is not None:
            connector.__dict__.pop("log_metrics", None)

    def _count_batch(self) -> None:
        results = getattr(self._trainer, "_results", None)
        batch = getattr(results, "batch", None)
        if batch is None:
            return
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # "ambiguous collection": a guess is fine for throughput
                self._samples += int(_data.extract_batch_size(batch))
        except Exception:  # noqa: BLE001 - no batch size, no throughput
            pass
