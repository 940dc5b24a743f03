"""mlprof.profile and mlprof._KinetoProfile: the collection API.

A drop-in for torch.profiler.profile / torch_npu.profiler.profile. torch is
imported when a profiler is built, never at ``import mlprof``. Failures
inside the profiler never reach the training loop: they are logged once and
profiling switches itself off (see :class:`FailSafe`).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable

from ..capture import layout
from ..settings.profiler_config import CollectOptions, ExperimentalConfig, ProfilerLevel, check_activities
from ..errors import ConfigError, MlprofError, TorchUnavailableError
from ..settings.schedule import ProfilerAction, always_record
from .step_times import StepTimer
from .analysis_child import flush_analysis, spawn_analysis
from ..capture.files import write_json_atomic
from .capture_writer import CaptureWriter, default_worker_name
from .failsafe import FailSafe
from .handler import TraceHandler
from .module_recorder import ModuleRecorder
from .profile_exports import ProfileExports
from .recorder import HostRecorder
from .scalars import ScalarLog, activate as activate_scalars, deactivate as deactivate_scalars
from .sampler import samples_between, spawn_sampler
from .speed_probe import SpeedProbe
from .stack_sampler import StackSampler
from .torch_state import torch_state, window_state

if TYPE_CHECKING:
    from .monitor import JobMonitor

__all__ = ["profile", "_KinetoProfile"]

logger = logging.getLogger("mlprof")

# The JSON files of a window, by HostRecorder.files() key (also the window.json "files" key).
_WINDOW_JSON_FILES = {
    "steps": layout.STEPS_FILE,
    "markers": layout.MARKERS_FILE,
    "gc": layout.GC_FILE,
    "python_samples": layout.PYTHON_SAMPLES_FILE,
    "modules": layout.MODULES_FILE,
}


def _import_backend() -> Any:
    try:
        from . import torch_backend
    except ImportError as exc:
        raise TorchUnavailableError(
            f"mlprof.profile needs torch to collect ({exc}); install the torch build you train with, "
            "e.g. pip install torch==2.13.0"
        ) from None
    return torch_backend


class _KinetoProfile(ProfileExports):
    """Start/stop profiling without a schedule (torch_npu's ``_KinetoProfile``).

    The whole start()..stop() span is one window; export it with
    :meth:`export_chrome_trace` after stop().
    """

    _records_steps = False

    def __init__(
        self,
        *,
        activities: Iterable[Any] | None = None,
        record_shapes: bool = False,
        profile_memory: bool = False,
        with_stack: bool = False,
        with_flops: bool = False,
        with_modules: bool = False,
        experimental_config: ExperimentalConfig | None = None,
    ) -> None:
        self._init(activities, record_shapes, profile_memory, with_stack, with_flops, with_modules,
                   experimental_config, schedule=None, on_trace_ready=None)

    def _init(self, activities, record_shapes, profile_memory, with_stack, with_flops, with_modules,
              experimental_config, schedule, on_trace_ready) -> None:
        self.options = CollectOptions(
            activities=check_activities(activities),
            record_shapes=record_shapes,
            profile_memory=profile_memory,
            with_stack=with_stack,
            with_modules=with_modules,
            with_flops=with_flops,
            experimental_config=experimental_config or ExperimentalConfig(),
        )
        if schedule is not None and not callable(schedule):
            raise ConfigError(f"schedule must be mlprof.schedule(...) or a callable, got {schedule!r}")
        if on_trace_ready is not None and not callable(on_trace_ready):
            raise ConfigError(f"on_trace_ready must be callable, got {on_trace_ready!r}")
        self.on_trace_ready = on_trace_ready
        self._schedule = schedule or always_record
        self._monitor = self._monitor_for(schedule, on_trace_ready)
        if self._monitor is not None:
            self._schedule = self._monitor
        backend_module = _import_backend()
        level = self.options.profiler_level
        # torch_npu writes its raw data without building Python event objects;
        # so do we whenever nobody can ask this object for them.
        trace_only = isinstance(on_trace_ready, TraceHandler)
        self._backend = backend_module.ScheduledBackend(
            hooks=self,
            schedule_fn=self._checked_schedule,
            kineto=level is not ProfilerLevel.Level_none,
            record_steps=self._records_steps,
            torch_kwargs=backend_module.torch_profile_kwargs(self.options, trace_only),
        )
        self._failsafe = FailSafe(self._after_failure)
        self._recorder: HostRecorder | None = None
        self._step_timer = StepTimer()
        self._speed_probe: SpeedProbe | None = SpeedProbe()
        self._last_window: HostRecorder | None = None
        self._window_bounds = (0, 0)
        # The window's torch settings at its start and at its end (collect/torch_state.py).
        self._torch_state: tuple[dict[str, Any], dict[str, Any]] = ({}, {})
        self._window_index = 0
        self._capture: CaptureWriter | None = None
        self._user_metadata: dict[str, Any] = {}
        self._running = False
        self._sampler: Any = None
        self._stack_sampler: StackSampler | None = None
        self._module_recorder: ModuleRecorder | None = None
        # Training scalars (mlprof.log_scalar) of the capture, for the whole session.
        self._scalars: ScalarLog | None = None
        # Set by a caller whose job's end stops the profile (the trainer integrations, one window): the
        # window is then parsed once, at stop, with what the job logged after it. Parsed at the window's
        # end too, the capture was parsed twice, the second time for the scalars logged since.
        self.parse_at_stop = False
        self._parse_due = False

    def _monitor_for(self, schedule: Any, on_trace_ready: Any) -> "JobMonitor | None":
        """Monitor mode's JobMonitor (None when off); its windows are Level1 unless a level other than
        Level0, the default, was asked for."""
        exp = self.options.experimental_config
        if not exp.monitor:
            return None
        if not self._records_steps:
            raise ConfigError("monitor mode times steps: use mlprof.profile(...) and call step(), not _KinetoProfile")
        if schedule is not None:
            raise ConfigError("monitor mode decides when its windows open: give no schedule with monitor=True")
        if not isinstance(on_trace_ready, TraceHandler):
            raise ConfigError("monitor mode writes its step series into a capture: give "
                              "on_trace_ready=mlprof.tensorboard_trace_handler(DIR) with monitor=True")
        if exp.profiler_level is ProfilerLevel.Level0:
            self.options = dataclasses.replace(
                self.options, experimental_config=dataclasses.replace(exp, profiler_level=ProfilerLevel.Level1))
        from .monitor import JobMonitor

        return JobMonitor(max_windows=exp.monitor_max_windows)

    def _checked_schedule(self, step: int) -> ProfilerAction:
        action = self._schedule(step)
        if isinstance(action, ProfilerAction):
            return action
        name = getattr(action, "name", None)  # torch.profiler.schedule objects work too
        if name in ProfilerAction.__members__:
            return ProfilerAction[name]
        raise ConfigError(f"schedule returned {action!r}, not a ProfilerAction")

    # -- window hooks, called by the torch backend ------------------------------
    def window_started(self) -> None:
        exp = self.options.experimental_config
        threshold = exp.gc_detect_threshold
        self._recorder = HostRecorder(
            record_markers=exp.mstx,
            gc_threshold_ns=None if threshold is None else int(threshold * 1_000_000),
        )
        self._recorder.attach()
        self._window_bounds = (time.time_ns(), 0)
        # Read here, on the training thread: grad mode is per thread.
        self._torch_state = (torch_state(), {})
        self._start_attribution()

    def window_stopping(self) -> None:
        recorder, self._recorder = self._recorder, None
        if recorder is not None:
            recorder.detach()
        self._stop_attribution(recorder)
        self._last_window = recorder
        self._window_bounds = (self._window_bounds[0], time.time_ns())
        self._torch_state = (self._torch_state[0], torch_state())

    def _start_attribution(self) -> None:
        """Python stack sampling and module recording, on the thread that opens the window (the training thread)."""
        exp = self.options.experimental_config
        if exp.python_sampling:
            self._stack_sampler = StackSampler.for_current_thread(round(exp.python_sampling_interval_ms * 1_000_000))
            self._stack_sampler.start()
        if exp.record_modules:
            self._module_recorder = ModuleRecorder()
            self._module_recorder.attach()

    def _stop_attribution(self, recorder: HostRecorder | None) -> None:
        sampler, self._stack_sampler = self._stack_sampler, None
        modules, self._module_recorder = self._module_recorder, None
        if sampler is not None:
            sampler.stop()
            if recorder is not None:
                recorder.attribution["python_samples"] = sampler.to_json()
        if modules is not None:
            modules.detach()
            if recorder is not None:
                recorder.attribution["modules"] = modules.to_json()

    def window_ready(self) -> None:
        handler = self.on_trace_ready
        if isinstance(handler, TraceHandler):
            self._save_window_to_capture(handler)
        elif handler is not None:
            handler(self)

    # -- lifecycle ---------------------------------------------------------------
    def start(self) -> None:
        """Start collecting (the first window opens now if the schedule says so)."""
        if self._running or self._failsafe.failed:
            return
        self._running = True
        self._failsafe.run("start", self._start)

    def _start(self) -> None:
        handler = self.on_trace_ready
        if isinstance(handler, TraceHandler) and self._capture is None:
            self._capture = CaptureWriter(handler.output, handler.worker_name or default_worker_name(),
                                          self.options.to_dict())
            self._capture.user_metadata = self._user_metadata
            self._start_sampler()
            self._scalars = ScalarLog(self._capture.path,
                                      (lambda: self._backend.step_num) if self._records_steps else (lambda: None))
            activate_scalars(self._scalars)
            if self._monitor is not None:
                self._monitor.open(self._capture.path)
        self._backend.start()
        self._begin_step(time.time_ns())

    def _stopped_early(self, reason: str) -> None:
        """Record in the capture why collection stops before the schedule ends (written at stop())."""
        if self._capture is not None:
            self._capture.manifest.stopped_early = reason

    def _set_first_step(self, step: int) -> None:
        """Call before start(): the first step is ``step`` instead of 0 (with a schedule skipping to it)."""
        self._failsafe.run("first step", self._backend.set_first_step, step)

    def stop(self) -> None:
        """Stop collecting; a window still open is saved."""
        if not self._running:
            return
        self._running = False
        if self._failsafe.failed:
            return
        self._failsafe.run("stop", self._stop)

    def _stop(self) -> None:
        if self._monitor is not None and self._monitor.marks:
            self._catch_up(self._monitor.marks)
        if self._recorder is not None:
            # A step the stop cuts short is a piece of one, unless it is all the window has.
            self._recorder.end_step(time.time_ns(), partial=bool(self._recorder.steps))
        self._backend.stop()
        if self._capture is not None:
            late = self._stop_sampler()
            late = self._close_scalars() or late
            # The last step number reached: says why a capture has no window (the job ended first).
            self._capture.manifest.steps_seen = self._backend.step_num
            self._capture.manifest.step_times = self._step_timer.summary()
            self._capture.manifest.last_step_end_ns = self._step_timer.last_end_ns
            self._capture.manifest.job_steps = self._backend.step_num
            if self._monitor is not None:
                self._monitor.close()
            self._capture.close(layout.STATUS_FINISHED)
            if isinstance(self.on_trace_ready, TraceHandler) and self.on_trace_ready.analyse_flag:
                late, self._parse_due = late or self._parse_due, False
                if late and self._capture.manifest.windows:
                    # Written at stop, after the last window's parse (scalars logged since, host samples).
                    spawn_analysis(self._capture.path)
                flush_analysis(self._capture.path)

    def record_steps_after_stop(self, count: int, last_end_ns: int) -> None:
        """The job ran ``count`` more steps after stop(), the last ending at ``last_end_ns`` (mlprof run counts
        them at exit): the manifest's ``job_steps`` and ``last_step_end_ns`` then span the whole job."""
        capture = getattr(self, "_capture", None)
        if self._running or capture is None or capture.manifest.steps_seen is None or count <= 0:
            return
        capture.manifest.job_steps = capture.manifest.steps_seen + count
        capture.manifest.last_step_end_ns = last_end_ns
        self._failsafe.run("record steps after stop", capture.write_manifest)

    def _start_sampler(self) -> None:
        exp = self.options.experimental_config
        if exp.host_sys and self._capture is not None and self._sampler is None:
            self._sampler = spawn_sampler(self._capture.path / layout.HOST_SAMPLES_PARTIAL_FILE, os.getpid(),
                                          tuple(h.value for h in exp.host_sys), exp.host_sys_freq)

    def _stop_sampler(self) -> bool:
        """Stop the host sampler; True when its samples were written into the capture."""
        sampler, self._sampler = self._sampler, None
        if sampler is None or self._capture is None:
            return False
        sampler.terminate()
        sampler.wait(timeout=10)
        partial = self._capture.path / layout.HOST_SAMPLES_PARTIAL_FILE
        if partial.exists():
            write_json_atomic(self._capture.path / layout.HOST_SAMPLES_FILE, samples_between(partial, 0, 2**63))
            partial.unlink()
            return True
        return False

    def _close_scalars(self) -> bool:
        """Stop recording scalars; True when a last segment was written."""
        scalars, self._scalars = self._scalars, None
        deactivate_scalars(scalars)
        return scalars is not None and scalars.flush() is not None

    def _begin_step(self, now_ns: int) -> None:
        """A step starts: for the recorder's steps and for the step timer, under the schedule's action."""
        if self._records_steps and self._recorder is not None:
            self._recorder.begin_step(self._backend.step_num, now_ns)
        self._step_timer.begin(now_ns, self._backend.current_action)
        if self._monitor is not None:
            self._monitor.begin(self._backend.step_num, now_ns, self._backend.current_action,
                                batchable=self._recorder is None and self._backend.idle())

    def _after_failure(self) -> None:
        if self._monitor is not None:
            try:  # what was timed so far stays readable
                self._monitor.close()
            except (OSError, MlprofError):
                pass
        if self._recorder is not None:
            self._recorder.detach()
            self._recorder = None
        self._stop_attribution(None)
        try:
            self._backend.abandon()
        finally:
            if self._capture is not None:
                self._stop_sampler()
                try:  # keep what was logged, if the disk still takes it
                    self._close_scalars()
                finally:
                    self._close_failed()
                    self._parse_deferred_window()

    def _parse_deferred_window(self) -> None:
        """A window kept for the parse at stop is still parsed when profiling failed before stop."""
        if self._parse_due and self._capture is not None and self._capture.manifest.windows:
            self._parse_due = False
            try:
                spawn_analysis(self._capture.path)
            except OSError as exc:
                logger.error("mlprof: %s: could not start its parse: %s", self._capture.path, exc)

    def _close_failed(self) -> None:
        """Record the failure in profiler_info.json (status failed, the reason), making room first."""
        capture = self._capture
        capture.discard_partial_windows()
        try:
            capture.close(layout.STATUS_FAILED, self._failsafe.error)
        except (MlprofError, OSError) as exc:
            # `mlprof run` still reports the capture as failed (it finds it unfinished).
            logger.error("mlprof: %s: the failure could not be recorded in %s: %s", capture.path,
                         layout.INFO_FILE, exc)

    def __enter__(self) -> "_KinetoProfile":
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- results -----------------------------------------------------------------
    @property
    def enabled(self) -> bool:
        """False once an internal failure switched profiling off."""
        return not self._failsafe.failed

    @property
    def failure(self) -> str | None:
        """What failed and why, once an internal failure switched profiling off (None while enabled)."""
        return self._failsafe.error

    @property
    def capture_dir(self) -> Path | None:
        """The raw capture directory written by tensorboard_trace_handler, if any."""
        return None if self._capture is None else self._capture.path

    @property
    def step_num(self) -> int:
        monitor = self._monitor  # steps on monitor mode's fast path reach the backend at the batch's end
        return self._backend.step_num + (len(monitor.marks) if monitor is not None else 0)

    def _window_files(self) -> dict[str, Any]:
        recorder = self._last_window or HostRecorder()
        return recorder.files()

    def key_averages(self, *args: Any, **kwargs: Any) -> Any:
        """torch's per-op statistics of the last window (not with tensorboard_trace_handler)."""
        if isinstance(self.on_trace_ready, TraceHandler):
            raise MlprofError("key_averages() is not kept when tensorboard_trace_handler writes the capture; "
                              "run `mlprof parse` on the capture instead")
        return self._backend.key_averages(*args, **kwargs)

    def events(self) -> Any:
        if isinstance(self.on_trace_ready, TraceHandler):
            raise MlprofError("events() is not kept when tensorboard_trace_handler writes the capture")
        return self._backend.events()

    # -- metadata ----------------------------------------------------------------
    def add_metadata(self, key: str, value: str) -> None:
        """Attach a string to the capture (profiler_metadata.json) and the trace."""
        if not isinstance(key, str) or not isinstance(value, str):
            raise ConfigError("add_metadata(key, value) takes two strings")
        self._user_metadata[key] = value
        self._failsafe.run("add_metadata", self._add_trace_metadata, key, json.dumps(value))

    def add_metadata_json(self, key: str, value: str) -> None:
        """Attach a JSON document (given as a string) to the capture and the trace."""
        if not isinstance(key, str) or not isinstance(value, str):
            raise ConfigError("add_metadata_json(key, value) takes a key and a JSON string")
        try:
            decoded = json.loads(value)
        except ValueError as exc:
            raise ConfigError(f"add_metadata_json({key!r}): value is not valid JSON: {exc}") from None
        self._user_metadata[key] = decoded
        self._failsafe.run("add_metadata_json", self._add_trace_metadata, key, value)

    def _add_trace_metadata(self, key: str, json_value: str) -> None:
        if self._backend.has_trace():
            self._backend.add_metadata_json(key, json_value)
        else:
            self._backend.preset_metadata_json(key, json_value)

    # -- capture writing -----------------------------------------------------------
    def _save_window_to_capture(self, handler: TraceHandler) -> None:
        capture = self._capture
        if capture is None:  # handler used with start() skipped; create it now
            capture = self._capture = CaptureWriter(
                handler.output, handler.worker_name or default_worker_name(), self.options.to_dict())
            capture.user_metadata = self._user_metadata
        window_index = self._window_index
        self._window_index += 1
        partial = capture.begin_window(window_index)
        files = self._window_files()
        kineto = self._backend.has_trace()
        if kineto:
            # The cheapest write torch offers: Kineto's own JSON writer, plain text.
            self._backend.export_chrome_trace(str(partial / layout.KINETO_TRACE_FILE))
        names: dict[str, str | None] = {"kineto": layout.KINETO_TRACE_FILE if kineto else None}
        for key, name in _WINDOW_JSON_FILES.items():
            if key in files:
                write_json_atomic(partial / name, files[key])
                names[key] = name
        first_step, last_step = (self._last_window.step_range() if self._last_window else (None, None))
        start_ns, end_ns = self._window_bounds
        capture.torch_state.append(window_state(window_index, *self._torch_state))
        capture.finish_window(window_index, partial, {
            "level": self.options.profiler_level.name,
            "first_step": first_step,
            "last_step": last_step,
            "start_ns": start_ns,
            "end_ns": end_ns,
            "files": names,
            "kineto_events_written": kineto,
        })
        if self._scalars is not None:
            # Before the parse below, so it sees the values logged up to this window.
            self._scalars.flush()
        if handler.analyse_flag and self.parse_at_stop:
            self._parse_due = True
        elif handler.analyse_flag:
            spawn_analysis(capture.path)


class profile(_KinetoProfile):  # noqa: N801 - drop-in for torch.profiler.profile
    """Profile a training job: ``with mlprof.profile(...) as prof: ... prof.step()``.

    Arguments are those of torch.profiler.profile (and torch_npu's); see
    docs/collection.md for what each ``ExperimentalConfig.profiler_level``
    records on CPU and CUDA.
    """

    _records_steps = True

    def __init__(
        self,
        *,
        activities: Iterable[Any] | None = None,
        schedule: Callable[[int], Any] | None = None,
        on_trace_ready: Callable[[Any], Any] | None = None,
        record_shapes: bool = False,
        profile_memory: bool = False,
        with_stack: bool = False,
        with_modules: bool = False,
        with_flops: bool = False,
        experimental_config: ExperimentalConfig | None = None,
    ) -> None:
        self._init(activities, record_shapes, profile_memory, with_stack, with_flops, with_modules,
                   experimental_config, schedule=schedule, on_trace_ready=on_trace_ready)

    def step(self) -> None:
        """Mark the end of one training step and the start of the next."""
        monitor = self._monitor
        if monitor is not None and monitor.fast_left:
            # Monitor mode between windows, on a short step: a clock read and an append; the full boundary
            # comes once per batch (collect/monitor.py, BATCH_NS). Keep this path this short.
            monitor.fast_left -= 1
            monitor.marks.append((time.time_ns(), monitor.data_ns[0], monitor.gc_ns))
            return
        if not self._running or self._failsafe.failed:
            return
        now_ns = time.time_ns()
        if monitor is not None and monitor.marks:
            self._failsafe.run("step", self._catch_up, monitor.marks)
        self._step_timer.end(now_ns)
        if self._recorder is not None:
            self._recorder.end_step(now_ns)
            self._probe_speed(self._recorder)
        self._failsafe.run("step", self._step, now_ns)

    def _probe_speed(self, recorder: HostRecorder) -> None:
        """Time the host-speed probe after a recorded step (collect/speed_probe.py), between its end and the
        next step's start; a probe that fails is switched off for the job, with one log line."""
        if self._speed_probe is None:
            return
        try:
            # The probe is mlprof's, not the step's: the trace's step span ends before it (it was 14 of a
            # Python-heavy job's 75 samples of "time outside ops" at 1 thread, charged to the user's line).
            self._backend.end_step_annotation()
            cpu_ns = self._speed_probe.maybe_run()
            if cpu_ns is not None:
                recorder.record_speed_probe(cpu_ns)
        except Exception as exc:  # noqa: BLE001 - the probe must never stop the job or its profiling
            self._speed_probe = None
            logger.warning("mlprof: host-speed probe off for this job: %s", exc)

    def _catch_up(self, marks: list[tuple[int, int, int]]) -> None:
        """The steps monitor mode's fast path timed (each mark ends one and starts the next) reach the step
        timer and torch's step count; the monitor records them at its next ``end``."""
        self._step_timer.idle_steps([mark[0] for mark in marks])
        self._backend.skip_idle_steps(len(marks))

    def _step(self, now_ns: int | None = None) -> None:
        if self._monitor is not None and now_ns is not None:
            self._monitor.end(now_ns)
        self._backend.step()
        self._begin_step(time.time_ns())
