"""tensorboard_trace_handler: where finished windows go."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..settings.options import check_bool

__all__ = ["TraceHandler", "tensorboard_trace_handler"]


@dataclass(frozen=True)
class TraceHandler:
    """Writes each window into a capture dir under ``output`` (see docs/capture_format.md).

    mlprof.profile recognises this handler and writes the raw capture itself,
    using the cheapest path torch offers; the object is also callable so it
    can be passed wherever torch expects an ``on_trace_ready`` callable.
    """

    output: Path  # the results directory (tensorboard_trace_handler's dir_name, torch's name)
    worker_name: str | None = None
    analyse_flag: bool = True

    def __call__(self, prof: Any) -> None:
        save = getattr(prof, "_save_window_to_capture", None)
        if save is None:
            raise ConfigError("mlprof.tensorboard_trace_handler works with mlprof.profile, not torch.profiler.profile")
        save(self)


def tensorboard_trace_handler(
    dir_name: str | Path, worker_name: str | None = None, analyse_flag: bool = True
) -> TraceHandler:
    """Write each finished window to ``dir_name/{worker_name}_{timestamp}_mlprof/``.

    ``worker_name`` defaults to ``{hostname}_{pid}``; with ``analyse_flag`` the
    capture is parsed in a child process after each window.
    """
    if not isinstance(dir_name, (str, Path)) or not str(dir_name):
        raise ConfigError(f"tensorboard_trace_handler: dir_name must be a path, got {dir_name!r}")
    if worker_name is not None:
        if not isinstance(worker_name, str) or not worker_name or "/" in worker_name or worker_name in (".", ".."):
            raise ConfigError(f"tensorboard_trace_handler: worker_name must be a plain name, got {worker_name!r}")
    check_bool(analyse_flag, "tensorboard_trace_handler: analyse_flag")
    return TraceHandler(Path(dir_name).expanduser().absolute(), worker_name, analyse_flag)
