"""Rank-aware output directories: ``./output/profile/rank_{id}`` (MindFormers' layout).

An output path may hold ``{id}`` or ``{rank}`` (the same thing: the process's
global rank), resolved in each profiled process, so every rank of a job gets
its own directory. Spelled once here for the config file, ``mlprof run``, the
trainer integrations and the automatic profiler.
"""

from __future__ import annotations

import re
from pathlib import Path

from mlprof.errors import ConfigError

__all__ = ["check_output_template", "has_rank_field", "rank_output_dir", "output_root", "capture_search_dirs"]

RANK_FIELDS = ("id", "rank")
_FIELD = re.compile(r"\{([^{}]*)\}")


def check_output_template(template: str, option: str = "output") -> str:
    """Refuse placeholders other than {id}/{rank}, and paths that climb out with '..'."""
    if not isinstance(template, str) or not template.strip():
        raise ConfigError(f"{option}: expected a directory path, got {template!r}")
    for name in _FIELD.findall(template):
        if name not in RANK_FIELDS:
            raise ConfigError(f"{option}: unknown placeholder {{{name}}} in {template!r}; only {{id}} and {{rank}} "
                              "(the process's rank) are replaced")
    if ".." in Path(template).parts:
        raise ConfigError(f"{option}: {template!r} climbs out with '..', which is refused")
    return template


def has_rank_field(template: str) -> bool:
    return any(name in RANK_FIELDS for name in _FIELD.findall(template))


def rank_output_dir(template: str, rank: int) -> Path:
    """The output directory of one rank, absolute."""
    text = _FIELD.sub(lambda m: str(rank) if m.group(1) in RANK_FIELDS else m.group(0), template)
    return Path(text).expanduser().absolute()


def output_root(template: str) -> Path:
    """The directory above every rank's directory: the path up to the first part with a placeholder."""
    path = Path(template).expanduser().absolute()
    parts = path.parts
    for i, part in enumerate(parts):
        if _FIELD.search(part):
            return Path(*parts[:i])
    return path


def capture_search_dirs(template: str) -> list[Path]:
    """The existing directories a template can have resolved to (every rank's), sorted."""
    if not has_rank_field(template):
        return [rank_output_dir(template, 0)]
    pattern = str(Path(template).expanduser().absolute())
    root = output_root(template)
    glob = _FIELD.sub("*", pattern)[len(str(root)):].lstrip("/")
    return sorted(p for p in root.glob(glob) if p.is_dir() and not p.is_symlink())
