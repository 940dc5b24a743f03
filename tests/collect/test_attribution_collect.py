"""python_sampling and record_modules: what a window's python_samples.json and modules.json hold."""

from __future__ import annotations

import collections
import threading
import time

import pytest

import mlprof
from mlprof.collect.module_recorder import ModuleRecorder, _input_dtype
from mlprof.collect.stack_sampler import StackSampler

from .conftest import load_json, torch, windows_of

THIS_FILE = __file__


def busy_python_loop(duration_s: float) -> None:
    """Pure Python work, so the sampled innermost frame is this function."""
    end = time.perf_counter() + duration_s
    total = 0
    while time.perf_counter() < end:
        total += 1


def sleeping_phase(duration_s: float) -> None:
    time.sleep(duration_s)


class Net(torch.nn.Module):
    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.conv1 = torch.nn.Linear(16, 32)
        self.layers = torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.ReLU(inplace=inplace),
                                          torch.nn.Linear(32, 4))

    def forward(self, x):
        return self.layers(self.conv1(x))


class Exploding(torch.nn.Module):
    """Raises in forward while ``armed``: a user bug inside a module."""

    def __init__(self) -> None:
        super().__init__()
        self.inner = torch.nn.Linear(4, 4)
        self.armed = False

    def forward(self, x):
        x = self.inner(x)
        if self.armed:
            raise ValueError("bad batch")
        return x


def profiled(tmp_path, schedule=None, level="Level0", **exp):
    return mlprof.profile(
        activities=[mlprof.ProfilerActivity.CPU],
        schedule=schedule or mlprof.schedule(wait=0, warmup=0, active=2, repeat=1),
        on_trace_ready=mlprof.tensorboard_trace_handler(tmp_path, analyse_flag=False),
        experimental_config=mlprof.ExperimentalConfig(profiler_level=level, **exp),
    )


def train_net(net, steps: int, prof, between=None) -> list[float]:
    opt = torch.optim.SGD(net.parameters(), lr=0.05)
    x, y = torch.randn(64, 16), torch.randint(0, 4, (64,))
    losses = []
    for _ in range(steps):
        loss = torch.nn.functional.cross_entropy(net(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if between is not None:
            between()
        prof.step()
    return losses


def innermost_function_in_this_file(samples: dict, stack_index: int) -> str | None:
    for frame_index in reversed(samples["stacks"][stack_index]):
        file, _line, function = samples["frames"][frame_index]
        if file == THIS_FILE:
            return function
    return None


# -- Python stack sampling ---------------------------------------------------------------
@pytest.fixture(params=["signal", "thread"])
def sampling_method(request, monkeypatch):
    """Each sampling test runs with the timer signal (the default on the main thread) and with a sampling
    thread (what the sampler falls back to where no timer signal can be used)."""
    if request.param == "thread":
        monkeypatch.setattr(StackSampler, "_start_timer", lambda self: False)
    return request.param


@pytest.mark.parametrize("level", ["Level_none", "Level0"])
def test_samples_point_at_the_python_function_the_training_thread_is_in(tmp_path, level, sampling_method):
    phases: list[tuple[str, int, int]] = []

    def python_phases() -> None:
        for name, work in (("busy_python_loop", busy_python_loop), ("sleeping_phase", sleeping_phase)):
            start_ns = time.time_ns()
            work(0.15)
            phases.append((name, start_ns, time.time_ns()))

    with profiled(tmp_path, level=level, python_sampling=True, python_sampling_interval_ms=2) as prof:
        train_net(Net(), 3, prof, between=python_phases)
    (window,) = windows_of(prof.capture_dir)
    assert load_json(window / "window.json")["files"]["python_samples"] == "python_samples.json"
    samples = load_json(window / "python_samples.json")
    assert samples["interval_ns"] == 2_000_000 and samples["dropped"] == 0
    assert samples["method"] == sampling_method
    assert samples["tid"] == threading.get_native_id()
    assert all(isinstance(f, list) and len(f) == 3 for f in samples["frames"])
    for name, start_ns, end_ns in phases[:4]:  # the two recorded steps
        inside = [s for ts, s in samples["samples"] if start_ns <= ts <= end_ns]
        assert inside, f"no sample during {name}"
        found = collections.Counter(innermost_function_in_this_file(samples, s) for s in inside)
        assert found[name] > len(inside) / 2, (name, found)
    # Outermost first: train_net encloses the phase it called.
    _name, start_ns, end_ns = phases[0]
    stack = next(samples["stacks"][s] for ts, s in samples["samples"] if start_ns <= ts <= end_ns
                 and innermost_function_in_this_file(samples, s) == "busy_python_loop")
    functions = [samples["frames"][i][2] for i in stack]
    assert functions.index("train_net") < functions.index("python_phases") < functions.index("busy_python_loop")


def test_deep_stacks_keep_their_innermost_frames(tmp_path):
    def recurse(depth: int) -> None:
        if depth:
            recurse(depth - 1)
        else:
            busy_python_loop(0.1)

    with profiled(tmp_path, python_sampling=True, python_sampling_interval_ms=2) as prof:
        train_net(Net(), 3, prof, between=lambda: recurse(100))
    (window,) = windows_of(prof.capture_dir)
    samples = load_json(window / "python_samples.json")
    stacks = [samples["stacks"][s] for _ts, s in samples["samples"]]
    assert max(len(s) for s in stacks) == 64
    deepest = max(stacks, key=len)
    assert samples["frames"][deepest[-1]][2] == "busy_python_loop"


def test_a_failing_sampler_stops_quietly_and_training_goes_on(tmp_path, monkeypatch, capfd, sampling_method):
    def broken(self, frames):
        raise RuntimeError("sampler bug")

    monkeypatch.setattr(StackSampler, "_intern_stack", broken)
    with profiled(tmp_path, python_sampling=True) as prof:
        losses = train_net(Net(), 4, prof, between=lambda: busy_python_loop(0.02))
    assert len(losses) == 4 and prof.enabled
    (window,) = windows_of(prof.capture_dir)
    assert load_json(window / "python_samples.json")["samples"] == []
    assert "sampler bug" not in capfd.readouterr().err


def test_the_sampler_buffer_is_bounded_and_counts_what_it_drops():
    sampler = StackSampler.for_current_thread(interval_ns=500_000)
    sampler.max_samples = 3
    for _ in range(5):
        sampler._sample_once()
    out = sampler.to_json()
    assert len(out["samples"]) == 3 and out["dropped"] == 2


# -- module recording -------------------------------------------------------------------------
def test_modules_json_names_nested_modules_by_path_and_counts_every_forward(tmp_path):
    with profiled(tmp_path, record_modules=True) as prof:
        train_net(Net(), 3, prof)
    (window,) = windows_of(prof.capture_dir)
    assert load_json(window / "window.json")["files"]["modules"] == "modules.json"
    data = load_json(window / "modules.json")
    assert data["dropped"] == 0
    assert [tuple(m[:2]) for m in data["modules"]] == [
        ("Net", "Net"), ("Net.conv1", "Linear"), ("Net.layers", "Sequential"),
        ("Net.layers.0", "Linear"), ("Net.layers.1", "ReLU"), ("Net.layers.2", "Linear")]
    # Where each class lives and the dtypes it computes in, read at its first call.
    by_name = {m[0]: m for m in data["modules"]}
    assert by_name["Net"][2] == Net.__module__ and by_name["Net.layers.0"][2] == "torch.nn.modules.linear"
    assert by_name["Net.layers.0"][3] == "torch.float32" and by_name["Net.layers"][3] is None
    assert by_name["Net"][4] == "torch.float32"
    # Outermost calls carry their input's shape; nested ones do not.
    index_of = {m[0]: i for i, m in enumerate(data["modules"])}
    outer = [c for c in data["calls"] if c[0] == index_of["Net"]]
    inner = [c for c in data["calls"] if c[0] == index_of["Net.layers.0"]]
    assert outer and all(len(c) == 5 and c[4] == [64, 16] for c in outer), outer
    assert inner and all(len(c) == 4 for c in inner)
    counts = collections.Counter(data["modules"][c[0]][0] for c in data["calls"])
    assert set(counts.values()) == {2}, counts  # two recorded steps, one forward each
    tid = threading.get_native_id()
    assert all(c[3] == tid and c[2] is not None and c[1] <= c[2] for c in data["calls"])
    # A child's call lies inside its parent's.
    by_path = {data["modules"][c[0]][0]: c for c in data["calls"][:6]}
    assert by_path["Net"][1] <= by_path["Net.layers.0"][1] <= by_path["Net.layers.0"][2] <= by_path["Net"][2]


def test_modules_json_records_a_float64_model_and_non_tensor_inputs(tmp_path):
    model = Net().double()
    with profiled(tmp_path, record_modules=True) as prof:
        for _ in range(3):
            model(torch.randn(4, 16, dtype=torch.float64)).sum().backward()
            prof.step()
    (window,) = windows_of(prof.capture_dir)
    by_name = {m[0]: m for m in load_json(window / "modules.json")["modules"]}
    assert by_name["Net.layers.0"][3] == "torch.float64" and by_name["Net"][4] == "torch.float64"
    assert _input_dtype((3, "x")) is None and _input_dtype(()) is None
    assert _input_dtype((torch.zeros(2, dtype=torch.int64),)) is None


class KeywordLM(torch.nn.Module):
    """Called as ``model(input_ids=ids)``, as Hugging Face models are: global hooks see no argument."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(50, 8)
        self.head = torch.nn.Linear(8, 50)

    def forward(self, input_ids=None, flag=None):
        return self.head(self.embed(input_ids))


class NoTensorAnywhere(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inner = torch.nn.Identity()

    def forward(self, n=3):
        self.inner(n)
        return torch.ones(n)


def test_a_keyword_called_model_takes_its_input_shape_from_the_first_nested_tensor(tmp_path):
    model, other = KeywordLM(), NoTensorAnywhere()
    with profiled(tmp_path, record_modules=True) as prof:
        for seq_len in (7, 11, 5):
            model(input_ids=torch.randint(0, 50, (2, seq_len)))
            other(n=4)
            prof.step()
    (window,) = windows_of(prof.capture_dir)
    data = load_json(window / "modules.json")
    index_of = {m[0]: i for i, m in enumerate(data["modules"])}
    outer = [c[4] for c in data["calls"] if c[0] == index_of["KeywordLM"]]
    assert outer == [[2, 7], [2, 11]], outer  # the window holds the first two steps
    assert [c[4] for c in data["calls"] if c[0] == index_of["NoTensorAnywhere"]] == [None, None]


def test_inplace_relu_still_trains_with_record_modules(tmp_path):
    torch.manual_seed(0)
    with profiled(tmp_path, record_modules=True, schedule=mlprof.schedule(wait=0, warmup=1, active=4)) as prof:
        losses = train_net(Net(inplace=True), 12, prof)
    assert prof.enabled and losses[-1] < losses[0]
    windows = windows_of(prof.capture_dir)
    assert windows and all((w / "modules.json").is_file() for w in windows)


def test_an_exception_in_forward_leaves_the_recorder_consistent(tmp_path):
    model = torch.nn.Sequential(Exploding(), torch.nn.Linear(4, 2))
    x = torch.randn(3, 4)
    with profiled(tmp_path, record_modules=True, schedule=mlprof.schedule(wait=0, warmup=0, active=3, repeat=1)) as prof:
        model(x)
        prof.step()
        model[0].armed = True
        with pytest.raises(ValueError, match="bad batch"):
            model(x)
        model[0].armed = False
        prof.step()
        model(x)  # after the error: paths and nesting are as before
        prof.step()
    (window,) = windows_of(prof.capture_dir)
    data = load_json(window / "modules.json")
    paths = [m[0] for m in data["modules"]]
    assert paths == ["Sequential", "Sequential.0", "Sequential.0.inner", "Sequential.1"]
    ends = collections.defaultdict(list)
    for index, _start, end, _tid, *_shape in data["calls"]:
        ends[paths[index]].append(end)
    assert [e is None for e in ends["Sequential"]] == [False, True, False]
    assert [e is None for e in ends["Sequential.0"]] == [False, True, False]
    assert all(e is not None for e in ends["Sequential.0.inner"])  # it returned before the raise
    assert len(ends["Sequential.1"]) == 2  # not reached in the failing call


def test_module_recording_is_off_outside_windows_and_by_default(tmp_path):
    with profiled(tmp_path, schedule=mlprof.schedule(wait=1, warmup=0, active=1, repeat=1)) as prof:
        train_net(Net(), 3, prof)
    (window,) = windows_of(prof.capture_dir)
    files = load_json(window / "window.json")["files"]
    assert "modules" not in files and "python_samples" not in files
    assert not (window / "modules.json").exists()


def test_a_failing_module_recorder_stops_and_leaves_outputs_unchanged(tmp_path, monkeypatch):
    def broken(self, parent, module):
        raise RuntimeError("recorder bug")

    monkeypatch.setattr(ModuleRecorder, "_resolve", broken)
    torch.manual_seed(1)
    net = Net()
    x = torch.randn(2, 16)
    expected = net(x)
    with profiled(tmp_path, record_modules=True) as prof:
        assert torch.equal(net(x), expected)
        prof.step()
        prof.step()
    assert prof.enabled
    (window,) = windows_of(prof.capture_dir)
    assert load_json(window / "modules.json")["calls"] == []


# -- options --------------------------------------------------------------------------------
@pytest.mark.parametrize("bad", [0, -1, 0.1, 5000, float("nan"), float("inf"), "5", True, None])
def test_a_bad_sampling_interval_is_one_config_error(bad):
    with pytest.raises(mlprof.MlprofError, match="python_sampling_interval_ms"):
        mlprof.ExperimentalConfig(python_sampling_interval_ms=bad)


@pytest.mark.parametrize("name", ["python_sampling", "record_modules"])
def test_switches_must_be_booleans(name):
    with pytest.raises(mlprof.MlprofError, match=name):
        mlprof.ExperimentalConfig(**{name: "yes"})


def test_options_are_off_by_default_in_the_api():
    config = mlprof.ExperimentalConfig()
    assert (config.python_sampling, config.python_sampling_interval_ms, config.record_modules) == (False, 10.0, False)


def test_a_profiler_failure_mid_window_stops_sampling_and_removes_the_hooks(tmp_path, monkeypatch):
    from mlprof.collect import torch_backend

    real_step = torch_backend.ScheduledBackend.step
    calls = {"n": 0}

    def step_that_fails_once(self):
        calls["n"] += 1
        if calls["n"] == 2:
            raise RuntimeError("torch profiler broke")
        return real_step(self)

    monkeypatch.setattr(torch_backend.ScheduledBackend, "step", step_that_fails_once)
    with profiled(tmp_path, schedule=mlprof.schedule(wait=0, warmup=0, active=4, repeat=1),
                  python_sampling=True, record_modules=True) as prof:
        losses = train_net(Net(), 5, prof)
        assert not prof.enabled
        # Already stopped here, before stop(): no sampler thread, no module hooks.
        assert prof._stack_sampler is None and prof._module_recorder is None
    assert len(losses) == 5


def test_module_hooks_are_never_compiled_into_a_torch_compiled_model():
    """Global hooks also fire around a compiled model's calls; dynamo must run them as plain Python.

    Before, attaching the recorder to a compiled model with a graph break made dynamo compile the
    hooks as three new frames (150 ms charged to a Hugging Face model's first profiled step).
    """
    import torch
    import torch._dynamo
    from torch import nn
    from torch._dynamo.utils import counters

    from mlprof.collect.module_recorder import ModuleRecorder

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = nn.Linear(8, 8), nn.Linear(8, 8)

        def forward(self, x):
            x = self.a(x)
            torch._dynamo.graph_break()  # the rest runs in a resumed frame, where the hooks fire
            return self.b(x)

    torch._dynamo.reset()
    compiled = torch.compile(Net(), backend="eager")
    x = torch.randn(2, 8)
    compiled(x)
    compiled(x)
    frames = counters["frames"]["total"]
    recorder = ModuleRecorder()
    recorder.attach()
    try:
        compiled(x)
        compiled(x)
    finally:
        recorder.detach()
    assert counters["frames"]["total"] == frames
    assert len(recorder.calls) >= 2 and recorder.error is None
