"""What the trainer integrations share: importing their framework, and reading their options."""

from __future__ import annotations

import functools
import importlib
import logging
import os
import traceback
from collections.abc import Mapping
from dataclasses import dataclass, replace
from types import ModuleType
from typing import Any, Callable

from ..collect.run_options import RunOptions
from ..errors import ConfigError, MissingDependencyError
from ..profile_config import load_profile_config, trainer_run_options

__all__ = ["require", "IntegrationOptions", "integration_options", "never_raises"]

logger = logging.getLogger("mlprof")

# Where captures go when neither an output directory nor a config names one, and
# the trainer has no directory of its own.
FALLBACK_OUTPUT = "./mlprof_result"


def require(module: str, install: str, integration: str) -> ModuleType:
    """Import the framework an integration needs, or say in one line what to install."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingDependencyError(
            f"mlprof.integrations.{integration} needs {install} ({exc}); install it with: pip install {install}"
        ) from None


def never_raises(method: Callable) -> Callable:
    """A trainer hook of an integration that must never break training: the first error is
    logged, the integration's session is stopped (keeping what was written) and every later
    hook returns at once. The object needs ``_broken`` and ``session`` attributes."""

    @functools.wraps(method)
    def hook(self: Any, *args: Any, **kwargs: Any) -> Any:
        if self._broken:
            return None
        try:
            return method(self, *args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - the training job must go on
            self._broken = True
            logger.error("mlprof: %s failed in %s (%s: %s); profiling is switched off, training continues",
                         type(self).__name__, method.__name__, type(exc).__name__, exc)
            logger.debug("mlprof failure details:\n%s", traceback.format_exc())
            session = getattr(self, "session", None)
            if session is not None:
                try:
                    session.stop()
                except Exception:  # noqa: BLE001
                    logger.debug("mlprof: stopping after the failure failed:\n%s", traceback.format_exc())
            return None

    return hook


@dataclass(frozen=True)
class IntegrationOptions:
    options: RunOptions
    enabled: bool
    # False when the output directory is the trainer's to choose (known when training starts).
    output_given: bool


def integration_options(output: str | os.PathLike | None, start_step: int | None, active: int | None,
                        config: str | os.PathLike | Mapping | None, options: dict[str, Any]) -> IntegrationOptions:
    """Validated once, when the callback is built: a bad option raises ConfigError before training starts."""
    if config is not None:
        if start_step is not None or active is not None or options:
            raise ConfigError("config= brings its own profile options; give them there (profile_options), "
                              "not as arguments too")
        cfg = load_profile_config(config)
        # An output directory given beside the config is the user's latest word.
        opts = cfg.options if output is None else replace(cfg.options, output=str(output))
        return IntegrationOptions(opts, cfg.enabled, output_given=True)
    if active is not None:
        options = {**options, "active": active}
    opts = trainer_run_options(str(output) if output is not None else FALLBACK_OUTPUT, start_step=start_step,
                               **options)
    return IntegrationOptions(opts, True, output_given=output is not None)

