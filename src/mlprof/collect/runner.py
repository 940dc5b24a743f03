"""``mlprof run``: profile any command without editing it.

The command runs with profiling switched on through the environment
(``MLPROF_PROFILING_OPTIONS`` plus a start-up hook on ``PYTHONPATH``, so every
Python process of the job, torchrun's ranks included, writes its own
capture). Beside it run the system sampler and, with a storage limit, the
ageing of old windows. Signals are forwarded to the command; its exit code
is returned. This module never imports torch: the job does.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from ..capture import layout
from ..capture.output_path import capture_search_dirs, output_root
from ..capture.records import Manifest, read_manifest
from ..errors import CommandStartError, ConfigError, MlprofError
from .training_config import recorded_steps_text
from ..capture.files import make_private_dir, write_json_atomic
from .device_lock import DeviceLock, devices_of
from .run_options import OPTIONS_ENV, RUN_SAMPLES_ENV, TRAINER_STEPS_ENV, RunOptions
from .sampler import samples_between, spawn_sampler
from .storage import age_out

__all__ = ["RunResult", "run_command", "parse_environment"]

logger = logging.getLogger("mlprof")

_BOOTSTRAP_DIR = Path(__file__).with_name("bootstrap")
_FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2)


@dataclass
class RunResult:
    exit_code: int
    output: Path
    captures: list[Path]
    samples_file: Path | None
    # Why the command ran without profiling (e.g. --output not writable); None when profiled.
    profiling_off: str | None = None
    # What went wrong after the job, or what the user should know (one line each); never fatal.
    problems: list[str] = field(default_factory=list)


def parse_environment(text: str | None) -> dict[str, str]:
    """--environment "K=V;K2=V2" -> dict."""
    env: dict[str, str] = {}
    for item in (text or "").split(";"):
        if not item.strip():
            continue
        key, sep, value = item.partition("=")
        if not sep or not key.strip() or not key.strip().replace("_", "a").isalnum():
            raise ConfigError(f"--environment: {item!r} is not NAME=VALUE")
        env[key.strip()] = value
    return env


def _child_env(options: RunOptions, extra: dict[str, str], trainer_steps: bool) -> dict[str, str]:
    env = {**os.environ, **extra}
    env[OPTIONS_ENV] = options.to_json()
    env[RUN_SAMPLES_ENV] = "1"
    env.pop(TRAINER_STEPS_ENV, None)
    if trainer_steps:
        env[TRAINER_STEPS_ENV] = "1"
    env.pop("MLPROF_CONFIG_PATH", None)  # one way of profiling per job
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(_BOOTSTRAP_DIR), env.get("PYTHONPATH", "")) if p)
    return env


def run_command(options: RunOptions, command: list[str], environment: dict[str, str],
                profiling_off: str | None = None, trainer_steps: bool = False) -> RunResult:
    """Run ``command`` profiled; with ``profiling_off`` (why, e.g. ``profile: false`` in a config) it runs plain.

    ``trainer_steps`` numbers the steps like a trainer (the first optimizer step is 1) instead of from 0
    at the end of the first optimizer step: for a config's profile_start_step (``--config``).
    """
    if not command:
        raise ConfigError("no command to run: give it after --, e.g. mlprof run -- python train.py")
    # With {id}/{rank} in it, each rank resolves its own directory below this one.
    output = output_root(options.output)
    off = profiling_off or _output_problem(output)
    if off is not None:
        # As the profile() API does: the job is never stopped by its profiler
        # (the caller reports ``profiling_off``).
        return RunResult(_run_plain(command, {**os.environ, **environment}), output, [], None, profiling_off=off)
    options = replace(options, output=str(Path(options.output).expanduser().absolute()))
    env = _child_env(options, environment, trainer_steps)
    started_ns = time.time_ns()
    with DeviceLock(devices_of(env)):
        child = _start(command, env)
        forward = _SignalForwarder(child)
        samples_file = output / f"host_samples_{os.uname().nodename}_{child.pid}.jsonl" if options.host_sys else None
        sampler = spawn_sampler(samples_file, child.pid, options.host_sys, options.host_sys_freq) if samples_file else None
        stop_ageing = _start_ageing(options.output, options.storage_limit_bytes)
        try:
            code = _wait(child)
        finally:
            forward.restore()
            stop_ageing.set()
            if sampler is not None:
                sampler.terminate()
                sampler.wait(timeout=10)
    captures = _captures_since(options.output, started_ns)
    problems = []
    if samples_file is not None and samples_file.exists():
        attached = 0
        for capture in captures:
            # After the job: a full disk or a broken capture is reported, and the
            # job's exit code still wins.
            try:
                _attach_samples(capture, samples_file)
                attached += 1
            except (OSError, ValueError, MlprofError) as exc:
                problems.append(f"{capture}: host samples not attached (kept in {samples_file}): {exc}")
        if captures and attached == len(captures):
            # Every capture holds its span now: the file was a leftover at the --output root after every run.
            samples_file.unlink(missing_ok=True)
            samples_file = None
    for capture in captures:
        reason = failed_capture_reason(capture, code) or empty_capture_reason(capture, options, trainer_steps)
        if reason:
            problems.append(reason)
    problems.extend(_captures_without_manifest(options.output, started_ns))
    return RunResult(code, output, captures, samples_file, problems=problems)


def failed_capture_reason(capture: Path, exit_code: int) -> str | None:
    """What failed in a capture, once the job has ended; None when it was not a failure.

    A capture still ``running`` was never closed: its process died, or the disk was too full to
    record the failure. It is marked ``failed`` here with the reason, when the disk takes it.
    """
    manifest = _manifest(capture)
    if manifest is None:
        return None
    kept = f" ({len(manifest.windows)} window(s) written before it are kept)" if manifest.windows else ""
    if manifest.status == layout.STATUS_FAILED:
        return f"{capture}: the capture failed: {manifest.error or 'no reason was recorded'}{kept}"
    if manifest.status != layout.STATUS_RUNNING or _alive(manifest.pid):
        return None
    reason = f"the job ended ({_exit_text(exit_code)}) before the capture was closed{_disk_full(capture)}"
    manifest.status, manifest.error = layout.STATUS_FAILED, reason
    try:
        write_json_atomic(capture / layout.INFO_FILE, manifest)
    except MlprofError as exc:
        reason += f"; not recorded in {layout.INFO_FILE}: {exc}"
    return f"{capture}: the capture failed: {reason}{kept}"


def _exit_text(code: int) -> str:
    if code > 128:
        try:
            return f"exit code {code}, {signal.Signals(code - 128).name}"
        except ValueError:
            pass
    return f"exit code {code}"


def _disk_full(path: Path) -> str:
    """'; the file system ... is full' when less than 1 MiB is left where ``path`` is."""
    try:
        st = os.statvfs(path)
    except OSError:
        return ""
    free = st.f_bavail * st.f_frsize
    return f"; the file system holding it is full ({free} bytes free)" if free < (1 << 20) else ""


def _alive(pid: int | None) -> bool:
    """Whether the process that writes a capture still runs (a daemon of the job may outlive it)."""
    if not pid or pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def _captures_without_manifest(output: str, started_ns: int) -> list[str]:
    """Capture directories of this run whose profiler_info.json was never written (a full disk)."""
    found = []
    for folder in capture_search_dirs(output):
        for capture in sorted(folder.glob(f"*{layout.CAPTURE_DIR_SUFFIX}")):
            try:
                made_ns = capture.stat().st_mtime_ns
            except OSError:
                continue
            if made_ns >= started_ns and not os.path.lexists(capture / layout.INFO_FILE):
                found.append(f"{capture}: the capture failed before its {layout.INFO_FILE} was written"
                             f"{_disk_full(capture)}")
    return found


def empty_capture_reason(capture: Path, options: RunOptions, trainer_steps: bool = False) -> str | None:
    """Why a capture of ``mlprof run`` holds no window, in the user's terms; None when it has one."""
    manifest = _manifest(capture)
    if manifest is None or manifest.windows:
        return None
    if manifest.stopped_early:
        return f"{capture}: nothing was captured: {manifest.stopped_early}"
    # Trainer numbering counts steps from 1 (the schedule's step 0 is step 1).
    first = options.skip_first + options.wait + options.warmup + (1 if trainer_steps else 0)
    seen = manifest.steps_seen
    ended = (f"the job ended after {seen} step(s)" if isinstance(seen, int)
             else "the job ended before its first optimizer step")
    return (f"{capture}: nothing was captured: {ended}, and the first window records steps "
            f"{recorded_steps_text(options, first)} (--skip-first {options.skip_first}, --wait {options.wait}, "
            f"--warmup {options.warmup}, --active {options.active}); lower --skip-first or run more steps")


def _output_problem(output: Path) -> str | None:
    """Why captures cannot be written under ``output`` (None when they can)."""
    try:
        make_private_dir(output)
    except MlprofError as exc:
        return str(exc)
    try:
        with tempfile.TemporaryFile(dir=output):
            pass
    except OSError as exc:
        return f"{output}: not writable: {exc.strerror or exc}"
    return None


def _start(command: list[str], env: dict[str, str]) -> subprocess.Popen:
    try:
        return subprocess.Popen(command, env=env, process_group=0)
    except OSError as exc:
        raise CommandStartError(f"cannot start {command[0]!r}: {exc.strerror or exc}") from None


def _run_plain(command: list[str], env: dict[str, str]) -> int:
    child = _start(command, env)
    forward = _SignalForwarder(child)
    try:
        return _wait(child)
    finally:
        forward.restore()


def _wait(child: subprocess.Popen) -> int:
    while True:
        try:
            code = child.wait()
            break
        except KeyboardInterrupt:  # forwarded already; keep waiting for the job to finish saving
            continue
    return 128 - code if code < 0 else code


class _SignalForwarder:
    """The job runs in its own process group: each signal mlprof run gets is passed on exactly once."""

    def __init__(self, child: subprocess.Popen) -> None:
        self.child = child
        self.previous = {}
        for sig in _FORWARDED:
            self.previous[sig] = signal.signal(sig, self._forward)

    def _forward(self, signum: int, _frame) -> None:
        try:
            os.killpg(self.child.pid, signum)
        except ProcessLookupError:
            pass

    def restore(self) -> None:
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)


def _start_ageing(output: str, limit_bytes: int | None) -> threading.Event:
    stop = threading.Event()
    if limit_bytes:
        def loop() -> None:
            while not stop.wait(1.0):
                try:
                    # With {id} in the output, the limit holds for each rank's directory.
                    for folder in capture_search_dirs(output):
                        age_out(folder, limit_bytes)
                except OSError as exc:
                    logger.warning("mlprof: storage ageing failed: %s", exc)

        threading.Thread(target=loop, name="mlprof-storage-limit", daemon=True).start()
    return stop


def _captures_since(output: str, started_ns: int) -> list[Path]:
    found = []
    every = [c for folder in capture_search_dirs(output) for c in sorted(folder.glob(f"*{layout.CAPTURE_DIR_SUFFIX}"))]
    for capture in every:
        manifest = _manifest(capture)
        if manifest is not None and (manifest.created_wall_ns or 0) >= started_ns:
            found.append(capture)
    return found


def _manifest(capture: Path) -> Manifest | None:
    """A capture's profiler_info.json; None when it is missing or unreadable (reported by the parser)."""
    if not (capture / layout.INFO_FILE).is_file():
        return None
    try:
        return read_manifest(capture)[0]
    except MlprofError:
        return None


# Samples kept from after a capture's last window to the job's end (evenly spread over that stretch): the
# memory growth of the steps nobody profiled (analysis/growth.py), without a day-long job's every sample.
TAIL_SAMPLES = 1200


def _attach_samples(capture: Path, samples_file: Path) -> None:
    """Copy the samples taken while this capture was written into it (raw data, like its windows), and
    those of the rest of the job, thinned to ``TAIL_SAMPLES``."""
    manifest, _raw = read_manifest(capture)
    first_ns = (manifest.created_wall_ns or 0) - 1_000_000_000
    ends = [w.end_ns or 0 for w in manifest.windows]
    last_ns = (max(ends) if ends else time.time_ns()) + 1_000_000_000
    samples = samples_between(samples_file, first_ns, 2**63)
    write_json_atomic(capture / layout.HOST_SAMPLES_FILE, thin_tail(samples, last_ns, TAIL_SAMPLES))


def thin_tail(samples: list, last_ns: int, keep: int) -> list:
    """``samples`` up to ``last_ns`` and at most ``keep`` of the later ones, evenly spaced, the last kept."""
    head = [s for s in samples if s.ts_ns <= last_ns]
    tail = samples[len(head):]
    if len(tail) > keep > 0:
        stride = len(tail) / keep
        tail = [tail[min(len(tail) - 1, int(round((i + 1) * stride)) - 1)] for i in range(keep)]
    elif keep <= 0:
        tail = []
    return head + tail
