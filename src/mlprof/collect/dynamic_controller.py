"""Dynamic profiling: a running job collects when its config file changes.

The training thread only counts steps: while nothing is pending, ``step()``
is an increment and two comparisons. A daemon thread watches the file (every
2 s, then at the step interval measured between steps 10 and 11, at least
1 s), validates each change and queues it; the training thread starts the
capture at a step boundary. Ranks of one job agree on the first step through
torch.distributed's store when it exists, so their captures line up.
"""

from __future__ import annotations

import collections
import hashlib
import logging
import os
import stat
import sys
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path

from ..errors import ConfigError, MlprofError
from .dynamic_config import (CONFIG_FILE_NAME, MAX_ACTIVE_STEPS, DynamicConfig, parse_config, read_config_bytes,
                             read_config_file, write_template)
from .dynamic_logs import DynamicLogs
from .environment import rank_info
from .failsafe import log_failure

__all__ = ["DynamicController"]

FIRST_POLL_S = 2.0
MIN_POLL_S = 1.0


@dataclass
class _PendingCapture:
    config: DynamicConfig
    change_id: str  # identifies one edit of the file, the same on every rank
    changed_wall_ns: int
    not_before_wall_ns: int


class _Capture:
    """One collection: warmup + active steps from ``first_step``; or, with ``experimental_config.monitor``,
    monitor mode (collect/monitor.py) from ``first_step`` until an edit stops it or the job ends."""

    def __init__(self, config: DynamicConfig, first_step: int) -> None:
        from ..settings.schedule import schedule
        from .profile_builder import make_profile
        from .handler import tensorboard_trace_handler

        self.config = config
        self.first_step = first_step
        self.monitor = config.experimental().monitor
        self.steps_left = None if self.monitor else config.warmup + config.active
        self.prof = make_profile(
            config.collect_options(),
            schedule=None if self.monitor else
            schedule(wait=0, warmup=config.warmup, active=config.active, repeat=1, skip_first=first_step),
            on_trace_ready=tensorboard_trace_handler(Path(config.prof_dir), analyse_flag=config.analyse),
            first_step=first_step,
        )
        for key, value in config.metadata.items():
            if isinstance(value, str):
                self.prof.add_metadata(str(key), value)
            else:
                import json

                self.prof.add_metadata_json(str(key), json.dumps(value))
        self.prof.start()

    def step(self) -> bool:
        """Advance one step; True when the capture is complete and stopped (monitor mode: only if it failed)."""
        self.prof.step()
        if self.steps_left is None:
            return not self.prof.enabled
        self.steps_left -= 1
        if self.steps_left <= 0:
            self.prof.stop()
            return True
        return False


class DynamicController:
    def __init__(self, config_dir: Path, boundary: str = "mlprof.dynamic.step()") -> None:
        config_dir = Path(config_dir).expanduser().absolute()
        if config_dir.is_symlink():
            raise ConfigError(f"{config_dir} is a symbolic link, which is refused")
        config_dir.mkdir(parents=True, exist_ok=True)
        self.config_dir = config_dir
        self.config_path = config_dir / CONFIG_FILE_NAME
        self.logs = DynamicLogs.open(config_dir, lambda: rank_info()["rank"])
        if not os.path.lexists(self.config_path):
            write_template(self.config_path)
            self.logs.actions.info("created the template %s", self.config_path)
        self.step_num = 0
        self.poll_s = FIRST_POLL_S
        self._t_step10 = 0.0
        self._pending: collections.deque[_PendingCapture] = collections.deque()
        self._pending_lock = threading.Lock()  # the watcher replaces what the training thread may be taking
        self._capture: _Capture | None = None
        self._cancel = threading.Event()  # set by the watcher: stop the running capture
        self._seen = self._signature()  # the file as it is now is not a request
        try:
            self._seen_digest = hashlib.sha256(read_config_bytes(self.config_path)).hexdigest()
        except ConfigError as exc:  # refused as it is now: said once, and the next valid edit counts
            self._seen_digest = ""
            self.logs.monitor.warning("%s; waiting for a valid edit", exc)
        self._stop = threading.Event()
        self.captures_done: list[Path] = []
        self.logs.actions.info("watching %s; step boundary: %s", self.config_path, boundary)
        self._thread = threading.Thread(target=self._watch, name="mlprof-dynamic-watcher", daemon=True)
        self._thread.start()

    # -- training thread ---------------------------------------------------------
    def step(self) -> None:
        self.step_num += 1
        if self._capture is None and not self._pending:
            if self.step_num == 10 or self.step_num == 11:
                self._measure_interval()
            return
        try:
            self._advance()
        except Exception as exc:  # noqa: BLE001 - never break the job
            self.logs.actions.error("capture failed at step %d: %s: %s", self.step_num, type(exc).__name__, exc)
            log_failure(f"a capture at step {self.step_num}", exc, owner="dynamic profiling",
                        consequence="the capture is dropped (the next config edit starts another)")
            self._capture = None

    def _measure_interval(self) -> None:
        now = time.monotonic()
        if self.step_num == 10:
            self._t_step10 = now
        elif self._t_step10:
            self.poll_s = max(MIN_POLL_S, now - self._t_step10)
            self.logs.actions.info("step interval %.3f s: polling every %.3f s", now - self._t_step10, self.poll_s)

    def _advance(self) -> None:
        if self._cancel.is_set():
            self._cancel.clear()
            if self._capture is not None:
                self._capture.prof.stop()
                if self._capture.monitor:  # what it timed so far is a complete capture
                    self.logs.actions.info("monitor mode of steps %d-%d stopped by a config edit: %s",
                                           self._capture.first_step, self.step_num - 1, self._capture.prof.capture_dir)
                    if self._capture.prof.enabled and self._capture.prof.capture_dir is not None:
                        self.captures_done.append(self._capture.prof.capture_dir)
                else:
                    self.logs.actions.info("capture started at step %d cancelled by a config edit at step %d",
                                           self._capture.first_step, self.step_num)
                self._capture = None
        if self._capture is not None:
            if self._capture.step():
                prof = self._capture.prof
                capture_dir = prof.capture_dir
                ok = prof.enabled
                if ok:
                    self.logs.actions.info("capture of steps %d-%d written: %s", self._capture.first_step,
                                           self.step_num - 1, capture_dir)
                else:
                    self.logs.actions.error("capture of steps %d-%d FAILED: %s", self._capture.first_step,
                                            self.step_num - 1, _failure_reason(prof))
                if ok and capture_dir is not None:
                    self.captures_done.append(capture_dir)
                self._capture = None
            return
        with self._pending_lock:
            if not self._pending:
                return
            pending = self._pending[0]
        start_at = self._start_step_for(pending)  # may wait on the other ranks: not under the lock
        if start_at is None or self.step_num < start_at:
            return
        with self._pending_lock:
            if not self._pending or self._pending[0] is not pending:
                return  # replaced by an edit meanwhile: the next step looks at the new one
            self._pending.popleft()
        if pending.config.experimental().monitor:
            self.logs.actions.info("starting monitor mode at step %d into %s (until a config edit or the job's end)",
                                   self.step_num, pending.config.prof_dir)
        else:
            self.logs.actions.info("starting capture at step %d (%d warmup + %d active steps) into %s",
                                   self.step_num, pending.config.warmup, pending.config.active,
                                   pending.config.prof_dir)
        self._capture = _Capture(pending.config, self.step_num)

    def _start_step_for(self, pending: _PendingCapture) -> int | None:
        start_step = pending.config.start_step
        if start_step > 0:
            if self.step_num > start_step and not getattr(pending, "_late_logged", False):
                self.logs.actions.warning("start_step %d has passed (now at step %d): starting now",
                                          start_step, self.step_num)
                pending._late_logged = True  # type: ignore[attr-defined]
            return start_step if self.step_num <= start_step else self.step_num
        if time.time_ns() < pending.not_before_wall_ns:
            return None
        return _agree_across_ranks(pending.change_id, self.step_num, self.logs.actions)

    def start_capture_now(self, config_path: Path) -> None:
        """mlprof.dynamic.start(): collect from the current step with the options of ``config_path``."""
        try:
            config = read_config_file(Path(config_path))
            config = replace(config, active=max(1, min(config.active, MAX_ACTIVE_STEPS)),
                             prof_dir=str(_contained_prof_dir(config.prof_dir)))
        except ConfigError as exc:
            self.logs.actions.error("start(%s) refused: %s", config_path, exc)
            raise
        if self._capture is not None:
            self.logs.actions.warning("start(%s) ignored: a capture is already running", config_path)
            return
        self.logs.actions.info("start(%s): capture begins at step %d", config_path, self.step_num)
        self._capture = _Capture(config, self.step_num)

    # -- watcher thread ------------------------------------------------------------
    def _signature(self) -> tuple[int, int, int, int] | None:
        """What the directory entry is now (never followed, never opened): type, inode, mtime, size."""
        try:
            st = os.lstat(self.config_path)
        except OSError:
            return None
        return (stat.S_IFMT(st.st_mode), st.st_ino, st.st_mtime_ns, st.st_size)

    def _watch(self) -> None:
        while not self._stop.wait(self.poll_s):
            try:
                self.check_now()
            except Exception as exc:  # noqa: BLE001 - the watcher must outlive any bad file
                self.logs.actions.error("watcher error: %s: %s", type(exc).__name__, exc)

    def _ignore(self, exc: MlprofError) -> None:
        """One line per log for a refused state of the file (the watcher sees it once: see check_now)."""
        self.logs.monitor.warning("change ignored: %s", exc)
        self.logs.actions.error("invalid config ignored: %s", exc)

    def check_now(self) -> None:
        # Only a change of the directory entry is looked at, so a refused state is
        # logged once, not at every poll; the file is read only once it passed the checks.
        signature = self._signature()
        if signature == self._seen:
            return
        self._seen = signature
        if signature is None:
            self.logs.monitor.warning("%s disappeared; waiting for it to come back", self.config_path)
            return
        try:
            data = read_config_bytes(self.config_path)
        except ConfigError as exc:
            self._seen_digest = ""  # the content that comes back after it is a change
            self._ignore(exc)
            return
        digest = hashlib.sha256(data).hexdigest()
        if digest == self._seen_digest:
            return
        self._seen_digest = digest
        mtime_ns, size = signature[2], signature[3]
        self.logs.monitor.info("change detected (mtime %d ns, %d bytes)", mtime_ns, size)
        try:
            config = parse_config(data, self.config_path)
        except MlprofError as exc:
            self._ignore(exc)
            return
        rank = rank_info()["rank"]
        if config.is_rank and rank not in config.rank_list:
            self.logs.monitor.info("change took no effect here: rank %d is not in rank_list %s",
                                   rank, list(config.rank_list))
            return
        if config.active == 0:
            with self._pending_lock:
                self._pending.clear()
            if self._capture is not None:
                self._cancel.set()
            self.logs.monitor.info("change accepted: active 0 cancels the running capture (%s) and any queued one",
                                   "stopped at the next step" if self._capture is not None else "none running")
            return
        if config.active > MAX_ACTIVE_STEPS:
            self.logs.monitor.warning("active %d is more than %d steps: capturing %d", config.active,
                                      MAX_ACTIVE_STEPS, MAX_ACTIVE_STEPS)
            config = replace(config, active=MAX_ACTIVE_STEPS)
        try:
            config = replace(config, prof_dir=str(_contained_prof_dir(config.prof_dir)))
        except ConfigError as exc:
            self._ignore(exc)
            return
        delay_ns = int((2 * self.poll_s + 0.5) * 1e9)
        # The file says what is wanted now: a capture queued by an earlier edit and not
        # started yet (a far start_step, say) is replaced, never left to hold this one back.
        with self._pending_lock:
            replaced = bool(self._pending)
            self._pending.clear()
            self._pending.append(_PendingCapture(config, f"{mtime_ns}-{digest[:12]}", mtime_ns,
                                                 mtime_ns + delay_ns))
        when = f"at step {config.start_step}" if config.start_step else "at the next step boundary"
        running = self._capture
        if running is not None and running.monitor:
            self._cancel.set()  # monitor mode runs until told otherwise: this edit is that
        what = ("monitor mode (every step timed, windows on anomalies) queued" if config.experimental().monitor
                else f"capture of {config.active} step(s) queued")
        self.logs.monitor.info("change accepted: %s %s%s%s", what, when,
                               "" if running is None else " (after the running monitor mode, which stops at the "
                               "next step)" if running.monitor else " (after the current capture)",
                               "; it replaces the queued capture not started yet" if replaced else "")

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        if self._capture is not None:
            self._capture.prof.stop()
            self._capture = None
        self.logs.close()


def _contained_prof_dir(prof_dir: str) -> Path:
    """``prof_dir`` with symlinks resolved; a relative one must stay inside the
    job's working directory once resolved (a symlink there must not lead out)."""
    path = Path(prof_dir).expanduser()
    resolved = path.resolve()
    if not path.is_absolute():
        base = Path.cwd().resolve()
        if not resolved.is_relative_to(base):
            raise ConfigError(f"prof_dir: {prof_dir!r} resolves to {resolved}, outside the working "
                              f"directory {base} (through a symlink); refused")
    return resolved


def _failure_reason(prof) -> str:
    return prof.failure or "profiling switched itself off (see the mlprof log)"


# Steps ahead of its own that the first rank proposes: ranks of a synchronous job run up to a step apart at
# their step boundaries (the next collective holds the faster one back), so a start at the proposer's next
# step was already behind a rank one step ahead (steps 67-69 against 66-68 on a loaded machine).
_RANK_LEAD_STEPS = 2


def _agree_across_ranks(change_id: str, proposed_step: int, log: logging.Logger) -> int:
    """The first rank to get here fixes the start step for all (torch.distributed's store): a step a little
    ahead of its own, so that every rank reaches it."""
    dist = sys.modules.get("torch.distributed")
    try:
        if dist is None or not dist.is_available() or not dist.is_initialized():
            return proposed_step
        store = dist.distributed_c10d._get_default_store()
        agreed = store.compare_set(f"mlprof_dynamic/{change_id}", "", str(proposed_step + _RANK_LEAD_STEPS))
        agreed_step = int(agreed.decode() if isinstance(agreed, bytes) else agreed)
    except Exception as exc:  # noqa: BLE001 - fall back to starting here
        log.warning("could not agree on a start step with other ranks (%s); starting at %d", exc, proposed_step)
        return proposed_step
    if agreed_step < proposed_step:
        log.warning("other ranks started at step %d; this rank is late and starts at %d", agreed_step, proposed_step)
        return proposed_step
    return agreed_step


