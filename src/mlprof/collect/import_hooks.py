"""Hooks on modules the user's program imports (torch's optimizer, DataLoader), set without importing them.

Used by ``autostart`` (``mlprof run``, ``MLPROF_CONFIG_PATH``) and ``auto_profiler``.
"""

from __future__ import annotations

import functools
import importlib.abc
import importlib.util
import logging
import sys
from typing import Callable

__all__ = ["after_import", "on_optimizer_step"]

logger = logging.getLogger("mlprof")


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
    """Call ``callback`` after every step of the first optimizer that steps.

    torch's global post-hook runs inside the ``Optimizer.step#...`` annotation,
    so a step boundary placed there would cut that annotation in two. The hook
    therefore fires only once: it wraps the optimizer class's ``step`` so later
    boundaries fall just after the annotation closes.
    """
    state: dict[str, object] = {}

    def hook(optimizer, args, kwargs) -> None:  # noqa: ANN001 - torch's hook signature
        if "first" in state:
            return
        state["first"] = id(optimizer)
        cls = type(optimizer)
        original = cls.step

        @functools.wraps(original)  # keeps torch's "hooked" mark, so torch does not wrap it again
        def step(self, *a, **kw):  # noqa: ANN001, ANN202
            out = original(self, *a, **kw)
            if id(self) == state["first"]:
                callback()
            return out

        cls.step = step
        callback()

    after_import("torch.optim.optimizer", lambda module: module.register_optimizer_step_post_hook(hook))


def after_import(module_name: str, callback: Callable[[object], None]) -> None:
    """Run ``callback(module)`` now if ``module_name`` is imported, else right after it is."""
    module = sys.modules.get(module_name)
    if module is not None:
        callback(module)
    else:
        sys.meta_path.insert(0, _AfterImport(module_name, callback))
