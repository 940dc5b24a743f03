"""nn.Module forward calls of one capture window (modules.json).

Global forward pre-/post-hooks of torch.nn time every ``Module.__call__``.
Only forward hooks: global backward hooks wrap module inputs and outputs in
autograd functions, which breaks in-place ops (``ReLU(inplace=True)``) and
changes the job's graph. The post-hook is registered with ``always_call`` so
a forward that raises still closes its call (with an unknown end).

A module's path is found from the stack of modules running on the thread:
the name under which the parent running it holds it (``Net.layers.0``), or
its class name when no module is running (or when the caller does not hold
it). Paths are cached per (parent path, child object), so a call costs two
clock reads, a few dict lookups and one small list. Hooks return None and
never raise: a failure turns recording off for the rest of the window.
torch is imported only in attach().
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from typing import Any

from mlprof.collect.dynamo_skip import hide_from_dynamo

__all__ = ["ModuleRecorder", "MAX_CALLS"]

logger = logging.getLogger("mlprof")

# 1M calls is ~100 steps of a 10k-module-call model; a window is a few steps.
MAX_CALLS = 1_000_000
# Models that build modules on the fly would grow the path cache without end.
_MAX_CACHED_PATHS = 100_000
_ROOT = -1  # the "parent index" of a module called while no module runs
# An outermost call with no positional argument, whose input shape a nested call may give.
_SHAPE_PENDING = object()


class ModuleRecorder:
    def __init__(self, max_calls: int = MAX_CALLS) -> None:
        self.max_calls = max_calls
        self.modules: list[list[str | None]] = []  # [path, type, class_module, param_dtype, input_dtype]
        self.calls: list[list[Any]] = []  # [module_index, start_ns, end_ns | None, tid]
        self.dropped = 0
        self.error: str | None = None
        self._module_index: dict[tuple[str, str], int] = {}
        # (parent module index or _ROOT, id(child)) -> (module index, child); the child is kept so
        # that an id reused by a new object is recognised.
        self._paths: dict[tuple[int, int], tuple[int, Any]] = {}
        # Per thread: .tid (native id) and .stack of running (module, module index, call record or None).
        self._threads = threading.local()
        self._handles: list[Any] = []

    # -- lifecycle (training thread) --------------------------------------------------
    def attach(self) -> None:
        from torch.nn.modules import module as nn_module

        pre_hook, post_hook = self._make_hooks()
        hide_from_dynamo(pre_hook, post_hook)
        self._handles = [
            nn_module.register_module_forward_pre_hook(pre_hook),
            nn_module.register_module_forward_hook(post_hook, always_call=True),
        ]

    def detach(self) -> None:
        """Remove the hooks (idempotent); calls still running keep ``end_ns`` None."""
        handles, self._handles = self._handles, []
        for handle in handles:
            handle.remove()
        self._threads = threading.local()
        self._paths.clear()

    @property
    def attached(self) -> bool:
        return bool(self._handles)

    # -- hooks (any thread that calls a module) ------------------------------------------
    def _make_hooks(self) -> tuple[Any, Any]:
        """The two hooks as closures over locals: they run on every module call, so no
        attribute lookups on ``self`` on the common path."""
        time_ns = time.time_ns
        exc_info = sys.exc_info
        calls = self.calls
        append_call = calls.append
        paths = self._paths
        threads = self._threads
        max_calls = self.max_calls
        resolve = self._resolve

        def pre_hook(module: Any, _args: Any) -> None:
            start_ns = time_ns()
            try:
                try:
                    stack = threads.stack
                except AttributeError:  # first module call on this thread in the window
                    stack = threads.stack = []
                    threads.tid = threading.get_native_id()
                if stack:
                    parent = stack[-1]
                    cached = paths.get((parent[1], id(module)))
                    index = cached[0] if cached is not None and cached[1] is module else resolve(parent, module, _args)
                    root = stack[0][2]
                    if root is not None and root[4] is _SHAPE_PENDING:
                        # The outermost call took its input by keyword (``model(input_ids=x)``, which
                        # global hooks cannot see): the first tensor a nested module gets stands in.
                        shape = _input_shape(_args)
                        if shape is not None:
                            root[4] = shape
                else:
                    cached = paths.get((_ROOT, id(module)))
                    index = cached[0] if cached is not None and cached[1] is module else resolve(None, module, _args)
                if len(calls) < max_calls:
                    record = [index, start_ns, None, threads.tid]
                    if not stack:
                        # Outermost calls only (about one per step): the input's shape, so steps whose
                        # time follows the batch's size are seen without record_shapes.
                        shape = _input_shape(_args)
                        record.append(_SHAPE_PENDING if shape is None and not _args else shape)
                    append_call(record)
                else:
                    record = None
                    self.dropped += 1
                stack.append((module, index, record))
            except Exception as exc:  # noqa: BLE001 - never break the forward pass
                self._fail(exc)

        def post_hook(module: Any, _args: Any, output: Any) -> None:
            end_ns = time_ns()
            try:
                try:
                    stack = threads.stack
                except AttributeError:  # this thread's call began before the window
                    return
                if not stack:
                    return
                entry = stack[-1]
                if entry[0] is module:
                    stack.pop()
                else:
                    # Our pre-hook did not see this call (a pre-hook before it raised), or
                    # calls above it never closed: close this one, leave the others open.
                    depth = len(stack) - 1
                    while depth >= 0 and stack[depth][0] is not module:
                        depth -= 1
                    if depth < 0:
                        return
                    entry = stack[depth]
                    del stack[depth:]
                record = entry[2]
                if record is not None and len(record) > 4 and record[4] is _SHAPE_PENDING:
                    record[4] = None  # no nested module got a tensor either
                # always_call runs this hook from torch's `except` when forward raised,
                # with output None: such a call has no end.
                if record is not None and not (output is None and exc_info()[1] is not None):
                    record[2] = end_ns
            except Exception as exc:  # noqa: BLE001
                self._fail(exc)

        return pre_hook, post_hook

    def _resolve(self, parent: tuple[Any, int, Any] | None, module: Any, args: Any = ()) -> int:
        cls = type(module)
        type_name = cls.__name__
        path = type_name
        if parent is not None:
            name = _name_in(parent[0], module)
            if name is not None:
                path = f"{self.modules[parent[1]][0]}.{name}"
        key = (path, type_name)
        index = self._module_index.get(key)
        if index is None:
            index = self._module_index[key] = len(self.modules)
            # Once per module path: where its class is defined (torch.nn built-in or the user's) and
            # the dtypes it computes in, so a float64 model is seen without record_shapes.
            self.modules.append([path, type_name, cls.__module__, _param_dtype(module), _input_dtype(args)])
        if len(self._paths) >= _MAX_CACHED_PATHS:
            self._paths.clear()
        self._paths[(_ROOT if parent is None else parent[1], id(module))] = (index, module)
        return index

    def _fail(self, exc: Exception) -> None:
        """Stop recording for the rest of the window: the hooks remove themselves."""
        self.error = f"{type(exc).__name__}: {exc}"
        logger.debug("mlprof: module recording stopped for this window: %s", self.error, exc_info=True)
        for handle in self._handles:
            handle.remove()  # safe inside a hook: torch iterates over a copy of the hooks

    # -- results ---------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        """modules.json; call after detach()."""
        for call in self.calls:  # calls never closed may still wait for a nested shape
            if len(call) > 4 and call[4] is _SHAPE_PENDING:
                call[4] = None
        return {"modules": [list(m) for m in self.modules], "calls": self.calls, "dropped": self.dropped}


def _param_dtype(module: Any) -> str | None:
    """The dtype of the module's first own parameter ("torch.float64"), None without one."""
    try:
        for param in module.parameters(recurse=False):
            return str(param.dtype)
    except Exception:  # noqa: BLE001 - a user override of parameters() must not stop the recording
        return None
    return None


def _input_dtype(args: Any) -> str | None:
    """The dtype of the first positional argument when it is a floating or complex tensor."""
    first = args[0] if isinstance(args, tuple) and args else None
    dtype = getattr(first, "dtype", None)
    if dtype is None or not (getattr(dtype, "is_floating_point", False) or getattr(dtype, "is_complex", False)):
        return None
    return str(dtype)


def _input_shape(args: Any) -> list[int] | None:
    """The shape of the first positional argument when it is a tensor (``list(x.shape)``), else None."""
    first = args[0] if isinstance(args, tuple) and args else None
    shape = getattr(first, "shape", None)
    if shape is None or getattr(first, "dtype", None) is None:
        return None
    try:
        return [int(d) for d in shape]
    except (TypeError, ValueError):  # symbolic sizes under tracing
        return None


def _name_in(parent: Any, child: Any) -> str | None:
    """The attribute path of ``child`` under ``parent``: a direct child first, else any descendant."""
    for name, sub in parent._modules.items():
        if sub is child:
            return name
    for name, sub in parent.named_modules():
        if sub is child and name:
            return name
    return None
