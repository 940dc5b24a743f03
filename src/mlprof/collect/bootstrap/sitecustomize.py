"""Put first on PYTHONPATH by `mlprof run`: switches profiling on in every Python
process of the job (torchrun's ranks included), then hands over to any
sitecustomize the environment already had."""

import os
import sys

try:
    import mlprof.collect.autostart as _mlprof_autostart

    _mlprof_autostart.main()
except Exception as _exc:  # noqa: BLE001 - never stop the user's program from starting
    sys.stderr.write(f"mlprof: start-up hook failed: {_exc}\n")

_here = os.path.dirname(os.path.abspath(__file__))
try:
    import importlib.machinery
    import importlib.util

    _spec = importlib.machinery.PathFinder.find_spec(
        "sitecustomize", [p for p in sys.path if os.path.abspath(p or ".") != _here])
    if _spec is not None and _spec.loader is not None:
        _module = importlib.util.module_from_spec(_spec)
        _spec.loader.exec_module(_module)  # the environment's own sitecustomize, if any
except Exception as _exc:  # noqa: BLE001
    sys.stderr.write(f"mlprof: the environment's sitecustomize failed: {_exc}\n")
