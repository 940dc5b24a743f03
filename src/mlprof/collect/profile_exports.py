"""The export methods of a profile (``export_chrome_trace``, ``export_stacks``, ``export_memory_timeline``):
torch's, with mlprof's host events spliced in and torch's matplotlib-only HTML drawn without matplotlib.

A mixin of :class:`mlprof.collect.profiler._KinetoProfile`: it reads the profile's ``options``, ``_backend``,
``_failsafe`` and ``_window_files()``, and changes nothing of the profile.
"""

from __future__ import annotations

import os

from ..settings.profiler_config import ProfilerLevel
from ..errors import ConfigError
from . import chrome_events

__all__ = ["ProfileExports"]


class ProfileExports:
    def export_chrome_trace(self, path: str | os.PathLike) -> None:
        """Write the last window as a Chrome trace (``.gz`` suffix: gzipped), with mlprof's markers and GC."""
        self._failsafe.run("export_chrome_trace", self._export_chrome_trace, os.fspath(path))

    def _export_chrome_trace(self, path: str) -> None:
        files = self._window_files()
        plain = path[:-3] if path.endswith(".gz") else path
        if self._backend.has_trace():
            self._backend.export_chrome_trace(plain)
            chrome_events.splice_into_kineto_trace(plain, files, os.getpid())
        else:
            chrome_events.write_host_only_trace(plain, files, os.getpid())
        if plain != path:
            import gzip
            import shutil

            with open(plain, "rb") as src, gzip.open(path, "wb", compresslevel=3) as dst:
                shutil.copyfileobj(src, dst)
            os.unlink(plain)

    def export_stacks(self, path: str | os.PathLike, metric: str = "self_cpu_time_total") -> None:
        """Write collapsed stacks (FlameGraph input); needs with_stack=True."""
        if not (self.options.with_stack or self.options.profiler_level is ProfilerLevel.Level2):
            raise ConfigError("export_stacks needs with_stack=True (or profiler_level=Level2)")
        self._failsafe.run("export_stacks", self._backend.export_stacks, os.fspath(path), metric)

    def export_memory_timeline(self, path: str | os.PathLike, device: str | None = None) -> None:
        """Write the memory timeline: ``.html``, ``.json`` or ``.json.gz`` by suffix.

        Needs record_shapes, profile_memory and with_stack (Level2 sets all three).
        """
        path = os.fspath(path)
        if not path.endswith((".html", ".json", ".json.gz")):
            raise ConfigError(f"export_memory_timeline: {path!r} must end in .html, .json or .json.gz")
        if path.endswith(".html"):
            # torch's HTML needs matplotlib and silently writes nothing without it: draw the same
            # data with the dashboard's chart library instead, inlined, so the page always works offline.
            self._failsafe.run("export_memory_timeline", self._export_memory_html, path, device)
            return
        self._failsafe.run("export_memory_timeline", self._backend.export_memory_timeline, path, device)

    def _export_memory_html(self, path: str, device: str | None) -> None:
        import json
        import tempfile

        from .memory_page import TORCH_CATEGORIES, memory_timeline_html

        with tempfile.TemporaryDirectory() as tmp:
            data = os.path.join(tmp, "memory.json")
            self._backend.export_memory_timeline(data, device)
            with open(data) as f:
                times, sizes = json.load(f)
        try:  # torch's own category order, when this torch still has it
            from torch.profiler._memory_profiler import _CATEGORY_TO_INDEX

            names = tuple("Unknown" if c is None else c.name for c in _CATEGORY_TO_INDEX)
        except (ImportError, AttributeError):
            names = TORCH_CATEGORIES
        page = memory_timeline_html(times, sizes, device or "default device", names)
        tmp_path = f"{path}.tmp{os.getpid()}"
        with open(tmp_path, "w", encoding="utf-8") as f:
            f.write(page)
        os.replace(tmp_path, path)
