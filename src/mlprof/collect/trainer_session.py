"""One profiling session driven by a trainer's callbacks (Hugging Face Trainer, Lightning).

The integrations only translate their trainer's events into four calls:
``start`` (training begins), ``end_step`` (an optimizer step, or an eval
batch, has ended), ``log`` (the trainer logged values) and ``stop``. Steps are
numbered like the trainer's (from 1), so ``start_step=5`` records the
trainer's step 5 and the scalars of a step share its number.

Never breaks the training: an error in here, or in the profiler, is logged
once and ends profiling (the capture keeps what was written); the trainer's
calls then return at once.
"""

from __future__ import annotations

import atexit
import json
import logging
import shutil
import time
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable

from ..capture import layout
from ..capture.output_path import rank_output_dir
from .training_config import first_recorded_step, last_recorded_step, recorded_steps_text
from .capture_writer import default_worker_name
from .profile_builder import build_profile
from .environment import rank_info
from .failsafe import FailSafe
from .run_options import RunOptions
from .scalars import record_scalars

__all__ = ["TrainerSession", "SOURCE_MEASURED"]

logger = logging.getLogger("mlprof")

# Source of the throughput a session measures itself (scalars table).
SOURCE_MEASURED = "mlprof"


class TrainerSession:
    """A scheduled mlprof.profile plus the trainer's scalars, for one training run (or eval stage)."""

    def __init__(self, options: RunOptions, *, integration: str, analyse: bool = True,
                 stage: str | None = None) -> None:
        self.options = options
        self.integration = integration
        self.analyse = analyse
        self.stage = stage
        self.prof: Any = None
        self._failsafe = FailSafe(self._after_failure, owner=f"the {integration} integration")
        self.last_step: int | None = None
        self._boundary_ns = 0

    @property
    def running(self) -> bool:
        return self.prof is not None

    @property
    def capture_dir(self) -> Path | None:
        return None if self.prof is None else self.prof.capture_dir

    # -- the trainer's events -------------------------------------------------------
    def start(self, first_step: int, rank: int | None = None, metadata: Mapping[str, Any] | None = None) -> None:
        """Open the session; ``first_step`` is the number of the step about to run."""
        self._guard("start", self._start, first_step, rank, metadata or {})

    def end_step(self, samples: int | None = None, tokens: int | None = None) -> None:
        """The current step has ended: record its throughput, then mark the boundary."""
        if self.prof is not None:
            self._guard("step", self._end_step, samples, tokens)

    def log(self, values: Mapping[str, Any], step: int | None, source: str) -> None:
        """Values the trainer logged (numbers only are kept)."""
        if self.prof is not None and values:
            self._guard("log", record_scalars, dict(values), step, source)

    def stop(self) -> None:
        if self.prof is not None:
            self._guard("stop", self._stop)

    # -- work ---------------------------------------------------------------------------
    def _start(self, first_step: int, rank: int | None, metadata: Mapping[str, Any]) -> None:
        if self.prof is not None:
            self._stop()  # a second train() call: a capture of its own
        rank = rank_info()["rank"] if rank is None else rank
        worker = f"{default_worker_name()}_{self.stage}" if self.stage else None
        prof = build_profile(self.options, rank_output_dir(self.options.output, rank), numbered_from=first_step,
                             analyse=self.analyse, worker_name=worker)
        prof.add_metadata_json("integration", json.dumps(
            {"name": self.integration, "stage": self.stage, "first_step": first_step,
             "first_recorded_step": first_recorded_step(self.options), **metadata}, default=str))
        last = last_recorded_step(self.options)
        if last is not None and first_step > last and self.options.repeat == 1:
            logger.warning("mlprof: %s starts at step %d, after the steps to profile (%d-%d); nothing will be "
                           "profiled", self._what(), first_step, first_recorded_step(self.options), last)
        # One window: parsed once, when the trainer ends, with the scalars it logged after the window
        # (parsed at the window's end as well, every trainer run was parsed twice).
        prof.parse_at_stop = self.analyse and self.options.repeat == 1
        self.prof = prof
        self.last_step = first_step - 1
        prof.start()
        self._boundary_ns = time.time_ns()
        # A trainer that raises never calls its end hook: still save the window that is open.
        atexit.register(self.stop)

    def _end_step(self, samples: int | None, tokens: int | None) -> None:
        prof = self.prof
        elapsed_ns = time.time_ns() - self._boundary_ns
        step = prof.step_num
        if elapsed_ns > 0:
            measured = {}
            if samples:
                measured["samples_per_second"] = samples * 1e9 / elapsed_ns
            if tokens:
                measured["tokens_per_second"] = tokens * 1e9 / elapsed_ns
            record_scalars(measured, step, SOURCE_MEASURED)
        prof.step()
        # After step(): the stall of a window being saved belongs to no step's throughput.
        self._boundary_ns = time.time_ns()
        self.last_step = step

    def _stop(self) -> None:
        prof, self.prof = self.prof, None
        atexit.unregister(self.stop)
        prof.stop()
        self._remove_if_empty(prof.capture_dir)

    def _remove_if_empty(self, capture: Path | None) -> None:
        """A capture with no window holds no profile (``mlprof parse`` would refuse it): say why, remove it."""
        if capture is None or not capture.is_dir():
            return
        # Imported here: `import mlprof` stays free of msgspec (the capture records need it).
        from ..capture.records import read_manifest
        from ..errors import CaptureError

        if not (capture / layout.INFO_FILE).is_file():
            return
        try:
            manifest, _ = read_manifest(capture)
        except (OSError, CaptureError):
            return
        if manifest.windows or any((capture / layout.RAW_DIR).glob(f"{layout.WINDOW_PREFIX}*")):
            return
        first = first_recorded_step(self.options)
        logger.warning("mlprof: nothing was captured: %s ended after step %s, and the first window records steps "
                       "%s (start_step %d); lower start_step or run more steps. The empty capture %s is removed.",
                       self._what(), self.last_step, recorded_steps_text(self.options, first), first, capture)
        shutil.rmtree(capture, ignore_errors=True)

    def _what(self) -> str:
        return f"the {self.stage} stage" if self.stage else "training"

    def _guard(self, what: str, func: Callable[..., Any], *args: Any) -> Any:
        return self._failsafe.run(what, func, *args)

    @property
    def failed(self) -> bool:
        return self._failsafe.failed

    def _after_failure(self) -> None:
        """Profiling is off: stop the profiler, keeping what it wrote."""
        prof, self.prof = self.prof, None
        atexit.unregister(self.stop)
        if prof is not None:
            prof.stop()


def with_output(options: RunOptions, output: str | Path) -> RunOptions:
    """The options with another output directory (an integration's default, known at train start)."""
    return replace(options, output=str(output))
