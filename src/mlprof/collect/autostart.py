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

import logging
import os
import sys
import sysconfig
from pathlib import Path

from ..errors import MlprofError
from .analysis_child import ANALYSE_CHILD_ENV
from .import_hooks import after_import, on_optimizer_step  # noqa: F401 - re-exported
from .run_options import OPTIONS_ENV

__all__ = ["main", "install_pth", "pth_installed", "on_optimizer_step", "after_import"]

logger = logging.getLogger("mlprof")

PTH_NAME = "mlprof-autostart.pth"
_SWITCHES = ("MLPROF_CONFIG_PATH", "MLPROF_PROFILING_OPTIONS")
PTH_LINE = (
    "import os, sys; exec('try:\\n import mlprof.collect.autostart as m; m.main()\\n"
    "except Exception as e:\\n sys.stderr.write(\"mlprof: start-up hook failed: %s\\\\n\" % e)') "
    f"if (os.environ.get('{_SWITCHES[0]}') or os.environ.get('{_SWITCHES[1]}')) else None\n"
)


_started = False


def main() -> None:
    global _started
    # site may read the .pth twice (a venv's lib64 -> lib symlink): start once.
    if _started or os.environ.get(ANALYSE_CHILD_ENV):
        return
    _started = True
    config_dir = os.environ.get("MLPROF_CONFIG_PATH")
    if config_dir:
        from ..dynamic import init, step

        init(config_dir, _boundary="optimizer step (MLPROF_CONFIG_PATH)")
        on_optimizer_step(step)
        return  # one way of profiling per process: dynamic wins over fixed options
    options_json = os.environ.get(OPTIONS_ENV)
    if options_json:
        from .auto_profiler import AutoProfiler, on_dataloader_batch
        from .run_options import RunOptions

        try:
            options = RunOptions.from_json(options_json)
        except MlprofError as exc:
            sys.stderr.write(f"mlprof: profiling is off: {exc}\n")
            return
        auto = AutoProfiler(options)
        on_optimizer_step(auto.on_optimizer_step)
        on_dataloader_batch(auto.on_batch)


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
