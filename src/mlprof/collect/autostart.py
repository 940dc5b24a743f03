"""Profiling switched on from the environment, with no change to the script.

A one-line ``mlprof-autostart.pth`` in site-packages runs :func:`main` at
interpreter start-up, but only when ``MLPROF_CONFIG_PATH`` (dynamic
profiling) or ``MLPROF_PROFILING_OPTIONS`` is set; otherwise the line costs
one dictionary lookup. Iterations are marked by the optimizer's step: a hook
is registered on torch's global optimizer-step hooks as soon as the script
imports ``torch.optim``, so start-up never imports torch itself.

    python -m mlprof.collect.autostart --install    # write the .pth (setup.sh does this)
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import logging
import os
import sys
import sysconfig
from pathlib import Path
from typing import Callable

from .analysis_child import ANALYSE_CHILD_ENV

__all__ = ["main", "install_pth", "pth_installed", "on_optimizer_step"]

logger = logging.getLogger("mlprof")

PTH_NAME = "mlprof-autostart.pth"
_SWITCHES = ("MLPROF_CONFIG_PATH", "MLPROF_PROFILING_OPTIONS")
PTH_LINE = (
    "import os, sys; exec('try:\\n import mlprof.collect.autostart as m; m.main()\\n"
    "except Exception as e:\\n sys.stderr.write(\"mlprof: start-up hook failed: %s\\\\n\" % e)') "
    f"if (os.environ.get('{_SWITCHES[0]}') or os.environ.get('{_SWITCHES[1]}')) else None\n"
)


def main() -> None:
    if os.environ.get(ANALYSE_CHILD_ENV):
        return
    config_dir = os.environ.get("MLPROF_CONFIG_PATH")
    if config_dir:
        import mlprof

        mlprof.dynamic.init(config_dir, _boundary="optimizer step (MLPROF_CONFIG_PATH)")
        on_optimizer_step(mlprof.dynamic.step)


class _AfterImport(importlib.abc.MetaPathFinder):
    """Runs a callback once a module has been imported, without importing it ourselves."""

    def __init__(self, module_name: str, callback: Callable[[object], None]) -> None:
        self.module_name = module_name
        self.callback = callback

    def find_spec(self, fullname, path, target=None):  # noqa: ANN001 - importlib's protocol
        if fullname != self.module_name:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)
        if spec is None or spec.loader is None:
            return spec
        loader_exec = spec.loader.exec_module
        callback = self.callback

        def exec_module(module):  # noqa: ANN001
            loader_exec(module)
            try:
                callback(module)
            except Exception as exc:  # noqa: BLE001 - never break the user's import
                logger.error("mlprof: could not hook %s: %s", fullname, exc)

        spec.loader.exec_module = exec_module
        return spec


def on_optimizer_step(callback: Callable[[], None]) -> None:
    """Call ``callback`` after every step of the first optimizer that steps."""
    first_optimizer: list[int] = []

    def hook(optimizer, args, kwargs) -> None:  # noqa: ANN001 - torch's hook signature
        if not first_optimizer:
            first_optimizer.append(id(optimizer))
        if id(optimizer) == first_optimizer[0]:
            callback()

    def register(optimizer_module) -> None:  # noqa: ANN001
        optimizer_module.register_optimizer_step_post_hook(hook)

    module = sys.modules.get("torch.optim.optimizer")
    if module is not None:
        register(module)
    else:
        sys.meta_path.insert(0, _AfterImport("torch.optim.optimizer", register))


def _site_packages() -> Path:
    return Path(sysconfig.get_paths()["purelib"])


def pth_installed() -> bool:
    path = _site_packages() / PTH_NAME
    return path.is_file() and path.read_text() == PTH_LINE


def install_pth() -> Path:
    path = _site_packages() / PTH_NAME
    path.write_text(PTH_LINE)
    return path


if __name__ == "__main__":
    if sys.argv[1:] == ["--install"]:
        print(f"installed {install_pth()}")
    else:
        sys.exit("usage: python -m mlprof.collect.autostart --install")
