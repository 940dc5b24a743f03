"""Dynamic profiling (the Ascend PyTorch Profiler's dynamic_profile): profile a running job by editing a file.

    import mlprof
    mlprof.dynamic.init("./prof_cfg")      # writes ./prof_cfg/profiler_config.json
    for batch in loader:
        train_step(batch)
        mlprof.dynamic.step()

While the job runs, edit ``profiler_config.json`` (for example set
``"active": 3``): the next ``active`` steps (after ``warmup``, from
``start_step`` when set) are captured under ``prof_dir``. Every valid edit
gives one capture; a bad edit is logged under ``prof_cfg/log/`` and ignored.
With ``MLPROF_CONFIG_PATH=dir`` in the environment the same happens with no
code change, the optimizer step marking iterations (see docs/dynamic.md).
"""

from __future__ import annotations

import atexit
from pathlib import Path

__all__ = ["init", "step", "start", "shutdown"]

_controller = None


def init(config_dir: str | Path, *, _boundary: str = "mlprof.dynamic.step()") -> None:
    """Watch ``config_dir/profiler_config.json``, creating it with every key at its default."""
    global _controller
    from .collect.dynamic_controller import DynamicController

    shutdown()
    _controller = DynamicController(Path(config_dir), boundary=_boundary)


def step() -> None:
    """Mark the end of a training step (cheap while no capture is pending)."""
    controller = _controller
    if controller is not None:
        controller.step()


def start(config_path: str | Path) -> None:
    """Start a capture at this point with the options in ``config_path``."""
    path = Path(config_path)
    if _controller is None:
        init(path.parent)
    _controller.start_capture_now(path)


def shutdown() -> None:
    """Stop watching (a capture in progress is saved). Runs at exit too."""
    global _controller
    controller, _controller = _controller, None
    if controller is not None:
        controller.close()


def _controller_for_tests():
    return _controller


atexit.register(shutdown)
