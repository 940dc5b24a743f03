"""Tables from mlprof's sampled Python stacks and nn.Module calls
(python_samples.json, modules.json; docs/capture_format.md).

Which frames are the user's code is decided here, once: a call site is the
innermost frame outside the standard library, installed packages and mlprof,
so a ``torch.save`` deep in torch's serializer is reported at the user's line
that called it.
"""

from __future__ import annotations

import json
import re

import numpy as np

from mlprof.errors import CaptureError
from mlprof.parse.capture_files import ModulesFile, PythonSamplesFile

__all__ = ["is_library_file", "python_tables", "module_call_table"]

MISSING = int(np.iinfo(np.int64).min)
_LIBRARY = re.compile(
    r"(/site-packages/|/dist-packages/|/lib/python\d+(\.\d+)?/|/lib64/python\d+(\.\d+)?/|^<frozen |^<built-in"
    r"|/mlprof/collect/|/mlprof/mstx\.py$|/mlprof/dynamic\.py$)")


def is_library_file(path: str) -> bool:
    """Code the user did not write: the standard library, installed packages, mlprof's own hooks."""
    return bool(_LIBRARY.search(path))


def _site(frame: tuple[str, int, str]) -> str:
    return f"{frame[0]}:{frame[1]} {frame[2]}"


# Frames of their own before Python 3.12 (PEP 709 inlined list, dict and set comprehensions into the function
# that holds them); a generator expression still has one, called by whoever iterates it.
_COMPREHENSIONS = frozenset({"<listcomp>", "<dictcomp>", "<setcomp>", "<genexpr>"})


def _inline_comprehensions(frames: list) -> list:
    """The stack as Python 3.12+ reports it: a comprehension's frame becomes its enclosing function at the
    comprehension's line (its caller in the same file, dropped), so the same code is one function on every
    Python and a comprehension's time is the function's that holds it."""
    out: list = []
    for frame in frames:
        file, line, function = frame
        while function in _COMPREHENSIONS and out and out[-1][0] == file and not is_library_file(file):
            function = out.pop()[2]
        out.append((file, line, function))
    return out


def python_tables(data: PythonSamplesFile, path: str, step_of) -> dict[str, dict[str, np.ndarray]]:
    """``python_stacks`` and ``python_samples`` columns of one window (stack ids from 0)."""
    n_frames = len(data.frames)
    sites, files, lines, funcs, leaves, frames_json, user_json = [], [], [], [], [], [], []
    for stack in data.stacks:
        if any(not 0 <= i < n_frames for i in stack):
            raise CaptureError(f"{path}: a stack refers to a frame that does not exist")
        frames = _inline_comprehensions([data.frames[i] for i in stack])
        user = next((f for f in reversed(frames) if not is_library_file(f[0])), None)
        site = user or (frames[-1] if frames else ("<unknown>", 0, "<unknown>"))
        sites.append(_site(site))
        files.append(site[0])
        lines.append(site[1])
        funcs.append(site[2])
        leaves.append(_site(frames[-1]) if frames else None)
        frames_json.append(json.dumps([_site(f) for f in frames]))
        user_json.append(json.dumps([_site(f) for f in frames if not is_library_file(f[0])]))
    n_stacks = len(data.stacks)
    ts = np.array([s[0] for s in data.samples], dtype=np.int64)
    stack_ids = np.array([s[1] for s in data.samples], dtype=np.int64)
    if len(stack_ids) and (stack_ids.min() < 0 or stack_ids.max() >= n_stacks):
        raise CaptureError(f"{path}: a sample refers to a stack that does not exist")
    if data.interval_ns <= 0 and len(ts):
        raise CaptureError(f"{path}: interval_ns must be > 0")
    return {
        "python_stacks": {
            "stack_id": np.arange(n_stacks, dtype=np.int64),
            "call_site": np.array(sites, dtype=object), "call_site_file": np.array(files, dtype=object),
            "call_site_line": np.array(lines, dtype=np.int64), "call_site_function": np.array(funcs, dtype=object),
            "leaf": np.array(leaves, dtype=object), "frames": np.array(frames_json, dtype=object),
            "user_frames": np.array(user_json, dtype=object),
        },
        "python_samples": {
            "ts_ns": ts, "tid": np.full(len(ts), MISSING if data.tid is None else data.tid, dtype=np.int64),
            "stack_id": stack_ids, "weight_ns": np.full(len(ts), data.interval_ns, dtype=np.int64),
            "step": step_of(ts),
        },
    }


def _field(entry: list, index: int) -> str | None:
    """An optional field of a modules.json entry (older captures have only path and type)."""
    return entry[index] if len(entry) > index else None


def module_call_table(data: ModulesFile, path: str, step_of) -> dict[str, np.ndarray]:
    """``module_calls`` columns of one window (call ids from 0), with nesting per thread."""
    n_modules = len(data.modules)
    for c in data.calls:
        if not 4 <= len(c) <= 5 or not all(isinstance(v, int) or v is None for v in c[:4]) or c[1] is None:
            raise CaptureError(f"{path}: a module call is not [module, start_ns, end_ns, tid(, shape)]")
    calls = sorted(data.calls, key=lambda c: (c[3] if c[3] is not None else -1, c[1]))
    count = len(calls)
    depth = np.zeros(count, dtype=np.int64)
    parent = np.full(count, MISSING, dtype=np.int64)
    ends = np.array([MISSING if c[2] is None else c[2] for c in calls], dtype=np.int64)
    stack: list[int] = []
    last_tid = object()
    for i, (module, start, end, tid, *_shape) in enumerate(calls):
        if not 0 <= module < n_modules or len(data.modules[module]) < 2:
            raise CaptureError(f"{path}: a call refers to a module that does not exist")
        if end is not None and end < start:
            raise CaptureError(f"{path}: a module call ends before it starts")
        if tid != last_tid:
            stack, last_tid = [], tid
        # An open call (end unknown) encloses everything after it on its thread.
        while stack and ends[stack[-1]] != MISSING and ends[stack[-1]] <= start:
            stack.pop()
        if stack:
            parent[i] = stack[-1]
            depth[i] = len(stack)
        stack.append(i)
    start = np.array([c[1] for c in calls], dtype=np.int64)
    return {
        "call_id": np.arange(count, dtype=np.int64),
        "module_path": np.array([data.modules[c[0]][0] for c in calls], dtype=object),
        "module_type": np.array([data.modules[c[0]][1] for c in calls], dtype=object),
        "module_class_module": np.array([_field(data.modules[c[0]], 2) for c in calls], dtype=object),
        "param_dtype": np.array([_field(data.modules[c[0]], 3) for c in calls], dtype=object),
        "input_dtype": np.array([_field(data.modules[c[0]], 4) for c in calls], dtype=object),
        "input_shape": np.array([json.dumps(c[4]) if len(c) > 4 and isinstance(c[4], list) else None
                                 for c in calls], dtype=object),
        "tid": np.array([MISSING if c[3] is None else c[3] for c in calls], dtype=np.int64),
        "start_ns": start, "end_ns": ends,
        "dur_ns": np.where(ends == MISSING, MISSING, ends - start),
        "depth": depth, "parent_call_id": parent, "step": step_of(start),
    }
