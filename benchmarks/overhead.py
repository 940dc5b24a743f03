"""Profiling overhead of mlprof next to torch.profiler, on the bundled examples.

    .venv/bin/python benchmarks/overhead.py [--rounds 5] [--steps 20] [--examples cnn,lm]

For each example, in one process, configurations run in alternating blocks
(round-robin, so machine noise hits all of them alike): unprofiled, plain
torch.profiler (CPU, without and with shapes), mlprof at Level_none, Level0
and Level1, Level0 with python_sampling and record_modules (what
`mlprof run` records by default), and monitor mode between its windows. Each block profiles all its steps. It
prints the median step time per configuration and the ratios the project
targets:

    mlprof Level0 / torch.profiler          <= 1.03  (same detail: ops, no shapes)
    mlprof Level1 / torch.profiler+shapes   <= 1.03  (same detail: ops with shapes)
    mlprof Level_none / unprofiled          <= 1.02
    Level0+python_sampling+record_modules / Level0  <= 1.02
    mlprof monitor / unprofiled             <= 1.01  (every step timed, no window open)

Then the window-end stall, the time the training thread is blocked when a
window closes: mlprof's stop() (which writes the raw capture and starts the
parse child) against torch.profiler's stop() + export_chrome_trace().

A benchmark, not a test: numbers on a shared 2-core machine are noisy, so
read the ratios, and rerun with more rounds when they are close.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))

import mlprof  # noqa: E402
from mlprof.collect.analysis_child import wait_for_analysis  # noqa: E402

StepFn = Callable[[], float]


# --sampling-interval-ms: the sampler's interval to measure (None: the API's default).
SAMPLING_INTERVAL_MS: float | None = None


def _mlprof_block(level: str, out: Path, analyse: bool = False, attribution: bool = False):
    return mlprof.profile(
        activities=[mlprof.ProfilerActivity.CPU],
        on_trace_ready=mlprof.tensorboard_trace_handler(out, analyse_flag=analyse),
        record_shapes=False,
        experimental_config=mlprof.ExperimentalConfig(
            profiler_level=level, python_sampling=attribution, record_modules=attribution,
            **({"python_sampling_interval_ms": SAMPLING_INTERVAL_MS} if SAMPLING_INTERVAL_MS else {})),
    )


class _MonitorBlock:
    """Monitor mode (``monitor=True``), one profiler for the whole benchmark as for a whole job: its blocks
    only step it. Made (and its baseline window recorded) during warm-up, before anything is timed; with
    ``monitor_max_windows=1`` no window opens after the baseline (the gaps while other configurations run
    are long steps to it), so the blocks time what every step outside a window costs: the step clock, the
    series record and the triggers' bookkeeping."""

    prof = None

    @classmethod
    def make(cls, out: Path, warm_step: StepFn | None = None):
        if cls.prof is None:
            cls.prof = mlprof.profile(
                activities=[mlprof.ProfilerActivity.CPU],
                on_trace_ready=mlprof.tensorboard_trace_handler(out, analyse_flag=False),
                experimental_config=mlprof.ExperimentalConfig(monitor=True, monitor_max_windows=1,
                                                              python_sampling=True))
            cls.prof.start()
            for _ in range(80):  # the baseline window opens at step 5 and closes within 50 steps
                if warm_step is not None:
                    warm_step()
                cls.prof.step()
        return cls()

    def start(self) -> None:
        pass

    def stop(self) -> None:
        pass

    def step(self) -> None:
        self.prof.step()

    @classmethod
    def close(cls) -> None:
        if cls.prof is not None:
            cls.prof.stop()
            cls.prof = None


def _torch_block(record_shapes: bool):
    return torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=record_shapes)


CONFIGS: dict[str, Callable[[Path], object | None]] = {
    "unprofiled": lambda out: None,
    "torch.profiler": lambda out: _torch_block(False),
    "torch.profiler+shapes": lambda out: _torch_block(True),
    "mlprof Level_none": lambda out: _mlprof_block("Level_none", out),
    "mlprof Level0": lambda out: _mlprof_block("Level0", out),
    "mlprof Level1": lambda out: _mlprof_block("Level1", out),
    # What `mlprof run` adds by default: Python stack samples and module calls.
    "mlprof Level0+attribution": lambda out: _mlprof_block("Level0", out, attribution=True),
    "mlprof monitor": lambda out: _MonitorBlock.make(out),
}
MONITOR_PAIR = ("unprofiled", "mlprof monitor")


def run_block(step: StepFn, steps: int, prof, inside: list[float] | None = None) -> list[float]:
    """Each step's wall time, s (the profiler's step() included); ``inside``: gets each step()'s own time."""
    times = []
    if prof is not None:
        prof.start()
    for _ in range(steps):
        t0 = time.perf_counter()
        step()
        if prof is not None:
            t1 = time.perf_counter()
            prof.step()
            if inside is not None:
                inside.append(time.perf_counter() - t1)
        times.append(time.perf_counter() - t0)
    if prof is not None:
        prof.stop()
    return times


ATTRIBUTION_PAIR = ("mlprof Level0", "mlprof Level0+attribution")


def step_overhead(name: str, step: StepFn, rounds: int, steps: int, out: Path,
                  configs: tuple[str, ...] = tuple(CONFIGS)) -> dict[str, float]:
    samples: dict[str, list[float]] = {c: [] for c in configs}
    inside: dict[str, list[float]] = {c: [] for c in configs}
    for _ in range(3):
        step()  # warm caches and allocator before anything is timed
    if "mlprof monitor" in configs:
        _MonitorBlock.close()
        _MonitorBlock.make(out, step)
    for round_index in range(rounds):
        order = list(configs) if round_index % 2 == 0 else list(reversed(configs))
        for config in order:
            samples[config] += run_block(step, steps, CONFIGS[config](out), inside[config])
    _MonitorBlock.close()
    medians = {c: statistics.median(v) * 1e3 for c, v in samples.items()}
    print(f"\n== {name}: median step time over {rounds} x {steps} steps per configuration")
    for config, ms in medians.items():
        print(f"  {config:26s} {ms:9.2f} ms")
    pairs = {  # label: (configuration, its reference, target ratio)
        "mlprof Level0 / torch.profiler": ("mlprof Level0", "torch.profiler", 1.03),
        "mlprof Level1 / torch.profiler+shapes": ("mlprof Level1", "torch.profiler+shapes", 1.03),
        "mlprof Level_none / unprofiled": ("mlprof Level_none", "unprofiled", 1.02),
        "Level0+python_sampling+record_modules / Level0": (*reversed(ATTRIBUTION_PAIR), 1.02),
        "mlprof monitor / unprofiled": ("mlprof monitor", "unprofiled", 1.01),
    }
    if inside.get("mlprof monitor") and "unprofiled" in medians:
        # What the monitor's step() itself costs inside the loop, the steps' batch boundaries included: steadier
        # than the ratio of two step medians on a noisy machine (it leaves out what the boundary's work does to
        # the job's own caches, which the ratio keeps).
        mean_us = statistics.fmean(inside["mlprof monitor"]) * 1e6
        print(f"  mlprof monitor: step() inside the loop, mean {mean_us:.1f} us a step = "
              f"{mean_us / 10 / medians['unprofiled']:.2f}% of the unprofiled step")
    ratios, targets = {}, {}
    for label, (config, reference, target) in pairs.items():
        if config in medians and reference in medians:
            ratios[label], targets[label] = medians[config] / medians[reference], target
    for label, ratio in ratios.items():
        verdict = "ok" if ratio <= targets[label] else "OVER TARGET"
        print(f"  {label:48s} {ratio:6.3f}  (target <= {targets[label]:.2f}: {verdict})")
    return ratios


def window_stall(name: str, step: StepFn, rounds: int, steps: int, out: Path) -> None:
    ours, theirs = [], []
    for _ in range(rounds):
        prof = _mlprof_block("Level0", out, analyse=True)
        run_block(step, steps - 1, None)  # same amount of work before each stop
        prof.start()
        for _ in range(steps):
            step()
            prof.step()
        t0 = time.perf_counter()
        prof.stop()
        ours.append(time.perf_counter() - t0)
        wait_for_analysis(300)  # the parse child must not steal the CPU from the next measurement

        tprof = _torch_block(False)
        tprof.start()
        for _ in range(steps):
            step()
            tprof.step()
        t0 = time.perf_counter()
        tprof.stop()
        tprof.export_chrome_trace(str(out / f"torch_{time.time_ns()}.pt.trace.json"))
        theirs.append(time.perf_counter() - t0)
    mine, torch_ms = statistics.median(ours) * 1e3, statistics.median(theirs) * 1e3
    print(f"\n== {name}: window-end stall for a {steps}-step window (median of {rounds})")
    print(f"  mlprof stop() (writes capture, spawns parse)   {mine:9.1f} ms")
    print(f"  torch stop() + export_chrome_trace()          {torch_ms:9.1f} ms")
    verdict = "ok" if mine <= torch_ms else "OVER TARGET"
    print(f"  ratio mlprof / torch                          {mine / torch_ms:9.3f}  (target <= 1.00: {verdict})")


def idle_marker_cost(calls: int = 200_000) -> None:
    """ns per call of an mstx marker while nothing profiles, next to torch's record_function."""
    import timeit

    def noop() -> None:
        return None

    def mstx_range() -> None:
        mlprof.mstx.range_end(mlprof.mstx.range_start("r"))

    def torch_range() -> None:
        with torch.profiler.record_function("r"):
            pass

    print(f"\n== idle marker cost, ns per call (best of 5 x {calls:,})")
    for label, func in [("empty Python call", noop), ("mlprof.mstx.mark", lambda: mlprof.mstx.mark("m")),
                        ("mlprof.mstx range_start+range_end", mstx_range),
                        ("torch record_function enter+exit", torch_range)]:
        best = min(timeit.repeat(func, number=calls, repeat=5)) / calls * 1e9
        print(f"  {label:36s} {best:8.0f} ns")


def make_mlp_step():
    """A small MLP step of about 2 ms at one torch thread: the shortest step the monitor target is set for."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 256),
                                torch.nn.ReLU(), torch.nn.Linear(256, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(128, 256), torch.randint(0, 10, (128,))

    def step() -> float:
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return 0.0

    return step


def monitor_step_cost(out: Path, calls: int = 5000) -> None:
    """us per prof.step() of monitor mode between windows, with no work in the step: its whole cost per step
    (step clock, schedstat and statm reads, the series record, the triggers), best and median of 7 rounds,
    and what that is on a 2 ms step. Less sensitive to a busy machine than the ratio of two step medians."""
    _MonitorBlock.close()
    block = _MonitorBlock.make(out)
    rounds = []
    for _ in range(7):
        t0 = time.perf_counter_ns()
        for _ in range(calls):
            block.step()
        rounds.append((time.perf_counter_ns() - t0) / calls / 1e3)
    _MonitorBlock.close()
    best, median = min(rounds), statistics.median(rounds)
    print(f"\n== monitor mode, us per step() between windows (7 x {calls:,} empty steps)")
    print(f"  best {best:.2f} us, median {median:.2f} us: on a 2 ms step {1 + best / 2000:.4f}x (best), "
          f"{1 + median / 2000:.4f}x (median)")


def boundary_costs(rounds: int = 40) -> None:
    """What a step boundary's calls cost right after a real torch step (the MLP at the current thread count),
    against the same call again at once: a system call after a step meets cold caches and TLB, so monitor
    mode's per-step procfs reads cost far more in a training loop than in an empty one."""
    import os

    step = make_mlp_step()
    schedstat = os.open("/proc/thread-self/schedstat", os.O_RDONLY)
    statm = os.open("/proc/self/statm", os.O_RDONLY)
    probes = {"os.getppid() (a trivial system call)": os.getppid,
              "pread /proc/thread-self/schedstat": lambda: os.pread(schedstat, 128, 0),
              "pread /proc/self/statm": lambda: os.pread(statm, 64, 0),
              "time.thread_time_ns()": time.thread_time_ns,
              "time.time_ns() (vDSO)": time.time_ns,
              "a Python function that does nothing": lambda: None}
    for _ in range(30):
        step()
    first = {k: [] for k in probes}
    again = {k: [] for k in probes}
    for _ in range(rounds):
        for name, call in probes.items():
            step()
            t0 = time.perf_counter_ns()
            call()
            t1 = time.perf_counter_ns()
            call()
            first[name].append(t1 - t0)
            again[name].append(time.perf_counter_ns() - t1)
    os.close(schedstat)
    os.close(statm)
    print(f"\n== a step boundary's calls right after a torch step vs again at once (medians of {rounds})")
    for name in probes:
        print(f"  {name:40s} {statistics.median(first[name]) / 1e3:7.2f} us   {statistics.median(again[name]) / 1e3:6.2f} us")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=20, help="steps per block")
    parser.add_argument("--examples", default="cnn,lm", help="cnn, lm, mlp (comma-separated)")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    parser.add_argument("--no-stall", action="store_true", help="skip the window-end stall measurement")
    parser.add_argument("--attribution-only", action="store_true",
                        help="only Level0 against Level0 + python_sampling + record_modules (more rounds in less time)")
    parser.add_argument("--monitor-only", action="store_true",
                        help="only monitor mode against unprofiled (more rounds in less time)")
    parser.add_argument("--boundary-costs", action="store_true",
                        help="only the cost of a step boundary's calls right after a real step (cold) and again (hot)")
    parser.add_argument("--sampling-interval-ms", type=float, default=None,
                        help="python_sampling_interval_ms of the attribution configuration (default: the API's)")
    args = parser.parse_args()
    global SAMPLING_INTERVAL_MS
    if args.threads:
        torch.set_num_threads(args.threads)
    SAMPLING_INTERVAL_MS = args.sampling_interval_ms
    import cnn_train
    import transformer_lm

    examples = {"mlp": ("MLP, about 2 ms a step at 1 thread (make_mlp_step)", make_mlp_step),
                "cnn": ("CNN (examples/cnn_train.py)", cnn_train.make_step),
                "lm": ("transformer LM (examples/transformer_lm.py)", transformer_lm.make_step)}
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, mlprof {mlprof.__version__}")
    if args.boundary_costs:
        boundary_costs()
        return
    idle_marker_cost()
    if args.monitor_only:
        with tempfile.TemporaryDirectory(prefix="mlprof_overhead_") as tmp:
            monitor_step_cost(Path(tmp))
    with tempfile.TemporaryDirectory(prefix="mlprof_overhead_") as tmp:
        for key in args.examples.split(","):
            label, make_step = examples[key]
            step = make_step()
            configs = (ATTRIBUTION_PAIR if args.attribution_only else MONITOR_PAIR if args.monitor_only
                       else tuple(CONFIGS))
            step_overhead(label, step, args.rounds, args.steps, Path(tmp), configs)
            if not args.no_stall:
                window_stall(label, step, max(3, args.rounds // 2), args.steps, Path(tmp))


if __name__ == "__main__":
    main()
