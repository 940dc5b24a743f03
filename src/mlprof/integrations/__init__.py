"""Trainer integrations: profiling switched on from inside a training framework.

    from mlprof.integrations.transformers import MlprofCallback    # Hugging Face Trainer
    from mlprof.integrations.lightning import MlprofProfiler       # PyTorch Lightning

Each module imports its framework (and torch) only when it is imported itself;
``import mlprof`` and ``import mlprof.integrations`` never do. Without the
framework installed, importing its module raises ``mlprof.MlprofError`` (an
``ImportError`` too) saying what to install.
"""

from __future__ import annotations

__all__: list[str] = []
