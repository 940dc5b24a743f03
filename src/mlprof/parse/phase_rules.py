"""Which spans define the phases of a training step: the rules applying the vocabulary.

The phases and idle causes are declared once in :mod:`mlprof.tables.phases`,
the names that define them in :mod:`mlprof.tables.names`; these rules apply them to span names, and
:mod:`mlprof.parse.attribution` writes the resulting ``phase_spans`` table,
which every analysis, export and page reads. Nothing else decides what counts
as data loading, forward, backward, optimizer or communication.

A span *defines* a phase when its name says so (``enumerate(DataLoader)#...``,
``Optimizer.step#...``, ``autograd::engine::evaluate_function: ...``,
``gloo:all_reduce``, an ``nn.Module`` call, or a user annotation / mstx range
such as ``## forward ##`` or ``load_batch``). Ops inside a span inherit its
phase; the innermost defining span wins, so forward and backward run inside
``Optimizer.step(closure)`` are forward and backward, and an ``## optimizer ##``
annotation nested in a step is the optimizer.
"""

from __future__ import annotations

import re

from mlprof.tables.names import (ANNOTATION_WORDS, is_backward, is_data_loading, is_host_communication,
                                 is_module_frame, is_optimizer, is_step_span)

__all__ = ["span_phase", "idle_cause"]

_WORD = re.compile(r"[a-z0-9]+")


def _annotation_phase(name: str) -> str | None:
    words = _WORD.findall(name.lower())
    # Also join neighbours so "load batch", "load_batch" and "loadBatch" all read "loadbatch".
    keys = set(words) | {a + b for a, b in zip(words, words[1:])}
    named = [phase for phase, vocabulary in ANNOTATION_WORDS if keys & vocabulary]
    # "fwd_bwd" or "forward and backward" spans several phases: it defines none.
    return named[0] if len(named) == 1 else None


def span_phase(name: str, annotation: bool) -> str | None:
    """The phase a span defines, or None when it only inherits one.

    ``annotation`` is True for user annotations and mstx ranges, whose words
    are read; framework op names are matched by their fixed forms only.
    """
    if is_step_span(name):
        return None
    if is_data_loading(name):
        return "data_loading"
    if is_optimizer(name):
        return "optimizer"
    if is_backward(name):
        return "backward"
    if is_host_communication(name):
        return "communication"
    if is_module_frame(name):
        return "forward"
    if annotation and not name.startswith("aten::"):
        return _annotation_phase(name)
    return None


def idle_cause(host_phase: str) -> str:
    """Why the device idled while the step's host thread was in ``host_phase``."""
    if host_phase in ("data_loading", "python", "gc", "communication"):
        return host_phase
    return "launch"

