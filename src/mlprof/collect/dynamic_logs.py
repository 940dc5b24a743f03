"""The two logs of dynamic profiling, under ``config_dir/log/``.

``mlprof_dynamic_{host}_{pid}.log`` records every action, warning and error;
``mlprof_monitor_{host}_{pid}.log`` records each change of the config file and
whether it took effect. Each file rotates at 200 KB keeping one backup. One
file pair per process, so ranks never rotate each other's files.
"""

from __future__ import annotations

import logging
import logging.handlers
import os
import socket
from dataclasses import dataclass
from pathlib import Path

from ..capture.files import make_private_dir

__all__ = ["DynamicLogs", "ROTATE_BYTES"]

ROTATE_BYTES = 200 * 1024
_FORMAT = "%(asctime)s %(levelname)s [rank %(rank)s pid %(process)d] %(message)s"


class _RankFilter(logging.Filter):
    def __init__(self, rank_getter) -> None:
        super().__init__()
        self._rank_getter = rank_getter

    def filter(self, record: logging.LogRecord) -> bool:
        record.rank = self._rank_getter()
        return True


def _file_logger(name: str, path: Path, rank_getter) -> logging.Logger:
    logger = logging.getLogger(name)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    for handler in list(logger.handlers):
        logger.removeHandler(handler)
        handler.close()
    handler = logging.handlers.RotatingFileHandler(path, maxBytes=ROTATE_BYTES, backupCount=1, encoding="utf-8")
    handler.setFormatter(logging.Formatter(_FORMAT))
    handler.addFilter(_RankFilter(rank_getter))
    logger.addHandler(handler)
    return logger


@dataclass
class DynamicLogs:
    actions: logging.Logger
    monitor: logging.Logger
    log_dir: Path

    @classmethod
    def open(cls, config_dir: Path, rank_getter) -> "DynamicLogs":
        # The private mode only when made here: an existing directory keeps its own.
        log_dir = make_private_dir(config_dir / "log", "dynamic profiling log directory")
        stem = f"{socket.gethostname()}_{os.getpid()}"
        tag = f"{id(log_dir):x}"
        return cls(
            actions=_file_logger(f"mlprof.dynamic.{tag}", log_dir / f"mlprof_dynamic_{stem}.log", rank_getter),
            monitor=_file_logger(f"mlprof.monitor.{tag}", log_dir / f"mlprof_monitor_{stem}.log", rank_getter),
            log_dir=log_dir,
        )

    def close(self) -> None:
        for logger in (self.actions, self.monitor):
            for handler in list(logger.handlers):
                logger.removeHandler(handler)
                handler.close()
