"""What both examples share: command-line options and the profiled loop."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Callable

import mlprof


def parse_args(description: str, default_steps: int) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--steps", type=int, default=default_steps, help="training steps to run")
    parser.add_argument("--out", default="./result", help="where the capture directory is written")
    parser.add_argument("--level", default="Level0", choices=[lvl.name for lvl in mlprof.ProfilerLevel],
                        help="mlprof profiler level")
    parser.add_argument("--no-profile", action="store_true", help="train without profiling")
    parser.add_argument("--no-analyse", action="store_true", help="do not parse the capture after collection")
    return parser.parse_args()


def train(step_fn: Callable[[], float], args: argparse.Namespace) -> Path | None:
    """Run ``args.steps`` steps, profiling steps 3-6 (after a 2-step wait and a warmup step)."""
    if args.no_profile:
        for _ in range(args.steps):
            step_fn()
        return None
    config = mlprof.ExperimentalConfig(profiler_level=args.level, gc_detect_threshold=1.0)
    with mlprof.profile(
        activities=[mlprof.ProfilerActivity.CPU],
        schedule=mlprof.schedule(wait=2, warmup=1, active=4, repeat=1),
        on_trace_ready=mlprof.tensorboard_trace_handler(args.out, analyse_flag=not args.no_analyse),
        record_shapes=True,
        experimental_config=config,
    ) as prof:
        prof.add_metadata("example", Path(__import__("sys").argv[0]).stem)
        for step in range(args.steps):
            with mlprof.mstx.range(f"train step {step}"):
                loss = step_fn()
            if step % 5 == 0:
                print(f"step {step:3d}  loss {loss:.4f}", flush=True)
            prof.step()
    return prof.capture_dir


def print_capture_summary(capture: Path | None) -> None:
    if capture is None:
        return
    info = json.loads((capture / "profiler_info.json").read_text())
    print(f"\ncapture: {capture}")
    for window in info["windows"]:
        steps = json.loads((capture / window["dir"] / "steps.json").read_text())
        times = ", ".join(f"#{s['step']} {(s['end_ns'] - s['start_ns']) / 1e6:.1f} ms" for s in steps)
        print(f"  {window['dir']}: steps {window['first_step']}-{window['last_step']}: {times}")
