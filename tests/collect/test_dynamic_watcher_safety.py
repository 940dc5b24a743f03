"""The dynamic-profiling watcher against hostile config files and edits (issue 30, items 4 and 10).

The file is checked before it is read: a FIFO must not block the watcher, a
symlink to /dev/zero must not be read, and each refused state is logged once.
The FIFO and /dev/zero cases run in a child process with a memory limit and a
timeout, so code that blocks or reads without bound fails the test instead of
hanging it or taking the machine's memory.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import mlprof
from mlprof.collect.dynamic_config import MAX_METADATA_DEPTH, MAX_START_STEP, MAX_WARMUP_STEPS, template

from .test_dynamic import controller, edit_config, log_text  # noqa: F401 - fixture

# The child: watch DIR, plant the hostile entry, poll twice, then put a valid edit back and poll again.
_CHILD = textwrap.dedent("""
    import json, os, resource, sys
    from pathlib import Path
    resource.setrlimit(resource.RLIMIT_AS, (1 << 31, 1 << 31))  # 2 GiB: an unbounded read dies, not the host
    import mlprof
    from mlprof.collect.dynamic_config import template
    cfg, kind, when = Path(sys.argv[1]), sys.argv[2], sys.argv[3]

    def plant(path):
        if kind == "fifo":
            os.mkfifo(path)
        else:
            path.symlink_to("/dev/zero")

    if when == "before-init":  # init runs in the training thread: it must not block either
        cfg.mkdir()
        plant(cfg / "profiler_config.json")
    mlprof.dynamic.init(cfg)
    controller = mlprof.dynamic._controller_for_tests()
    controller._stop.set()  # this process polls by hand
    path = controller.config_path
    if when == "while-watched":
        path.unlink()
        plant(path)
    controller.check_now()
    controller.check_now()  # the next poll: the same refused state, not logged again
    print("polled", flush=True)
    path.unlink()
    data = template()
    data.update(active=2, start_step=5, prof_dir=str(cfg.parent / "prof"))
    path.write_text(json.dumps(data))
    controller.check_now()
    print("pending", [p.config.active for p in controller._pending], flush=True)
    mlprof.dynamic.shutdown()
""")


def _run_child(tmp_path: Path, kind: str, when: str = "while-watched") -> tuple[subprocess.CompletedProcess, Path]:
    cfg = tmp_path / "cfg"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    try:
        result = subprocess.run([sys.executable, "-c", _CHILD, str(cfg), kind, when], capture_output=True,
                                text=True, timeout=120, env=env)
    except subprocess.TimeoutExpired:  # a watcher blocked on the FIFO
        raise AssertionError(f"the watcher blocked on the {kind}") from None
    return result, cfg


def test_a_fifo_config_neither_blocks_the_watcher_nor_kills_it(tmp_path):
    result, cfg = _run_child(tmp_path, "fifo")
    assert result.returncode == 0, result.stderr
    assert "pending [2]" in result.stdout, "a valid edit after the FIFO must still be accepted"
    monitor = log_text(cfg, "monitor")
    refused = [line for line in monitor.splitlines() if "change ignored" in line]
    assert len(refused) == 1 and "a FIFO, not a regular file" in refused[0], monitor


def test_a_config_linked_to_dev_zero_is_refused_without_reading_it(tmp_path):
    result, cfg = _run_child(tmp_path, "dev-zero")
    assert result.returncode == 0, result.stderr
    assert "pending [2]" in result.stdout
    monitor = log_text(cfg, "monitor")
    refused = [line for line in monitor.splitlines() if "change ignored" in line]
    assert len(refused) == 1 and "a symbolic link, not a regular file" in refused[0], monitor
    assert "watcher error" not in log_text(cfg, "dynamic")


@pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
def test_a_hostile_config_already_there_does_not_block_init(tmp_path, kind):
    result, cfg = _run_child(tmp_path, kind, "before-init")
    assert result.returncode == 0, result.stderr
    assert "pending [2]" in result.stdout
    monitor = log_text(cfg, "monitor")
    refused = [line for line in monitor.splitlines() if "not a regular file" in line]
    assert len(refused) == 1 and "waiting for a valid edit" in refused[0], monitor


def test_a_directory_in_place_of_the_config_is_refused_once(controller):  # noqa: F811
    controller.config_path.unlink()
    controller.config_path.mkdir()
    controller.check_now()
    controller.check_now()
    refused = [line for line in log_text(controller.config_dir, "monitor").splitlines() if "change ignored" in line]
    assert len(refused) == 1 and "a directory" in refused[0]


def test_a_config_over_1_mib_is_refused_before_it_is_read(controller):  # noqa: F811
    data = template()
    data["metadata"] = {"pad": "x" * (1 << 20)}
    controller.config_path.write_text(json.dumps(data))
    controller.check_now()
    assert "more than a config file should be" in log_text(controller.config_dir, "monitor")
    assert not controller._pending


def _rejected(controller, **changes) -> str:  # noqa: F811
    """Write the template with ``changes`` (one bad value at a time) and poll; the last refusal logged."""
    time.sleep(0.02)  # a distinct mtime even on coarse-clock filesystems (as edit_config)
    controller.config_path.write_text(json.dumps({**template(), **changes}))
    controller.check_now()
    assert not controller._pending, changes
    lines = [line for line in log_text(controller.config_dir, "monitor").splitlines() if "change ignored" in line]
    return lines[-1]


def test_absurd_start_steps_and_warmups_are_refused_with_the_reason(tmp_path, controller):  # noqa: F811
    prof_dir = str(tmp_path / "prof")
    assert "start_step: at most" in _rejected(controller, prof_dir=prof_dir, start_step=10**30)
    assert "start_step: at most" in _rejected(controller, prof_dir=prof_dir, start_step=MAX_START_STEP + 1)
    assert "expected an integer" in _rejected(controller, prof_dir=prof_dir, start_step=1e30)
    assert "expected an integer" in _rejected(controller, prof_dir=prof_dir, start_step=7.5)
    assert "warmup: at most" in _rejected(controller, prof_dir=prof_dir, warmup=MAX_WARMUP_STEPS + 1)
    assert "expected an integer" in _rejected(controller, prof_dir=prof_dir, active=1e30)


def test_a_far_start_step_does_not_hold_back_a_later_edit(tmp_path, controller, trainer):  # noqa: F811
    prof_dir = tmp_path / "prof"
    edit_config(controller.config_dir, prof_dir=str(prof_dir), active=1, start_step=MAX_START_STEP)
    controller.check_now()
    assert [p.config.start_step for p in controller._pending] == [MAX_START_STEP]
    edit_config(controller.config_dir, prof_dir=str(prof_dir), active=2, start_step=3)
    controller.check_now()
    assert [p.config.start_step for p in controller._pending] == [3]
    assert "replaces the queued capture" in log_text(controller.config_dir, "monitor")
    for _ in range(6):
        trainer.step()
        mlprof.dynamic.step()
    assert len(list(prof_dir.glob("*_mlprof"))) == 1, "the later edit must give its capture"


def test_deeply_nested_metadata_is_refused_with_a_clear_line(tmp_path, controller):  # noqa: F811
    prof_dir = str(tmp_path / "prof")
    data = {**template(), "prof_dir": prof_dir, "metadata": "DEEP"}
    depth = 50_000  # past the JSON reader's recursion limit (written by hand: json.dumps cannot)
    controller.config_path.write_text(json.dumps(data).replace('"DEEP"', "[" * depth + "1" + "]" * depth))
    controller.check_now()
    assert not controller._pending
    refused = [line for line in log_text(controller.config_dir, "monitor").splitlines() if "change ignored" in line]
    assert len(refused) == 1 and "nested too deeply" in refused[0]
    nested: object = "leaf"
    for _ in range(MAX_METADATA_DEPTH + 1):  # readable, but deeper than a capture's metadata may go
        nested = {"k": nested}
    line = _rejected(controller, prof_dir=prof_dir, metadata=nested)
    assert f"nested more than {MAX_METADATA_DEPTH} levels" in line
    assert "watcher error" not in log_text(controller.config_dir, "dynamic")
    time.sleep(0.02)
    controller.config_path.write_text(json.dumps({**template(), "prof_dir": prof_dir, "start_step": 4,
                                                  "metadata": {"a": {"b": [1, 2]}}}))
    controller.check_now()
    assert [p.config.metadata for p in controller._pending] == [{"a": {"b": [1, 2]}}]
