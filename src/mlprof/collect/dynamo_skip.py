"""Keep torch.compile from compiling mlprof's own Python that runs inside a compiled region.

mlprof runs code of its own on the training thread while the job's code runs: global
module hooks (``module_recorder``) fire around a compiled module's call, and the stack
sampler's signal handler (``stack_sampler``) runs wherever a tick lands, compiled code
included. Dynamo evaluates every new Python frame of that thread, so without this it
compiled them as frames of the job's: 150 ms of "compilation" charged to a Hugging Face
model's first profiled step and a recompilation finding the job never had (the hooks),
9 frames compiled in 1 s of a compiled model sampled every 0.5 ms (the handler).

Done per code object, so the eager path pays nothing (a ``torch.compiler.disable``
wrapper would add about 0.4 us to every call), and only where dynamo is already loaded:
importing it costs a second, and a job that has not loaded it compiles nothing. A job
that first loads dynamo inside a window gets the guard from the next window on.
Nothing here imports torch.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

__all__ = ["hide_from_dynamo"]

logger = logging.getLogger("mlprof")


def hide_from_dynamo(*functions: Any) -> None:
    """Make torch.compile run ``functions`` (and everything they call) as plain Python, never compile them."""
    eval_frame = sys.modules.get("torch._dynamo.eval_frame")
    if eval_frame is None:
        return
    try:
        from torch._dynamo.types import FrameAction, FrameExecStrategy

        skip_all = FrameExecStrategy(FrameAction.SKIP, FrameAction.SKIP)
        for function in functions:
            eval_frame.set_code_exec_strategy(function.__code__, skip_all)
    except Exception as exc:  # noqa: BLE001 - a private API of torch: its absence must not stop recording
        logger.debug("mlprof: could not hide mlprof's own code from torch.compile: %s", exc)
