"""What the trainer integrations share: importing their framework, and reading their options."""

from __future__ import annotations

import importlib
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from types import ModuleType
from typing import Any

from ..collect.failsafe import never_raises
from ..collect.run_options import RunOptions
from ..errors import ConfigError, MissingDependencyError
from ..collect.training_config import load_profile_config, trainer_run_options

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

