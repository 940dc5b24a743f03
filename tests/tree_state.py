"""What a directory holds, for tests that an mlprof command left its inputs alone.

Importable as ``tree_state`` (tests/ is on sys.path, as for ``shared_data``).
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

__all__ = ["snapshot"]


def snapshot(root: Path) -> dict[str, tuple]:
    """Every entry under ``root`` (links not followed): its kind and mode, and a file's content hash.

    The mode too: a directory planted as an output must not be chmodded (issue 30).
    """
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            st = os.lstat(path)
            digest = hashlib.sha256(path.read_bytes()).hexdigest() if stat.S_ISREG(st.st_mode) else None
            out[str(path.relative_to(root))] = (stat.S_IFMT(st.st_mode), stat.S_IMODE(st.st_mode), digest)
    return out
