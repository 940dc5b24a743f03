"""One fail-safe guard (collect/failsafe.py): every failure inside the job is logged by it, in one form, and
nothing reads another object's guard (dynamic profiling reached into the profile's ``_failsafe``)."""

from __future__ import annotations

import ast
import logging
from pathlib import Path

import mlprof

from .test_never_breaks_the_job import assert_training_completed, errors_from_mlprof, train_under_profiler

SRC = Path(mlprof.__file__).parent


def _sources():
    for f in sorted(SRC.rglob("*.py")):
        yield f.relative_to(SRC).as_posix(), ast.parse(f.read_text())


def test_failures_are_logged_only_by_the_failsafe():
    hand_written = sorted(f"{rel}:{node.lineno}" for rel, tree in _sources() if rel != "collect/failsafe.py"
                          for node in ast.walk(tree) if isinstance(node, ast.Constant)
                          and isinstance(node.value, str) and "training continues" in node.value)
    assert hand_written == []


def test_no_module_reads_another_objects_guard():
    reaches = sorted(f"{rel}:{node.lineno}" for rel, tree in _sources() for node in ast.walk(tree)
                     if (isinstance(node, ast.Attribute) and node.attr == "_failsafe"
                         and not (isinstance(node.value, ast.Name) and node.value.id == "self"))
                     or (isinstance(node, ast.Constant) and node.value == "_failsafe"
                         and rel != "collect/failsafe.py"))
    assert reaches == []


def test_a_profile_that_switched_itself_off_says_why(tmp_path, trainer, caplog):
    def broken_handler(prof):
        raise RuntimeError("handler exploded")

    prof = train_under_profiler(trainer, broken_handler)
    assert_training_completed(trainer)
    (error,) = errors_from_mlprof(caplog)
    assert not prof.enabled and "handler exploded" in prof.failure
    assert "handler exploded" in error.getMessage() and error.getMessage().endswith("training continues")
    assert error.levelno == logging.ERROR
