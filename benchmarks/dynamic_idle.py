"""Cost of dynamic profiling while idle: the watcher runs, nothing is collected.

    .venv/bin/python benchmarks/dynamic_idle.py [--rounds 8] [--steps 25]

Alternating blocks of the transformer LM example (examples/transformer_lm.py):
plain steps, and steps followed by mlprof.dynamic.step() with the config
watcher polling. Prints median step times and the ratio (target <= 1.005),
plus the cost of one idle mlprof.dynamic.step() call in nanoseconds.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import timeit
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))

import mlprof  # noqa: E402


def block(step, steps: int, dynamic: bool) -> list[float]:
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        step()
        if dynamic:
            mlprof.dynamic.step()
        times.append(time.perf_counter() - t0)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--steps", type=int, default=25)
    args = parser.parse_args()
    import transformer_lm

    step = transformer_lm.make_step()
    for _ in range(3):
        step()
    plain, dynamic = [], []
    with tempfile.TemporaryDirectory(prefix="mlprof_dyn_") as tmp:
        mlprof.dynamic.init(Path(tmp) / "cfg")
        for round_index in range(args.rounds):
            first_dynamic = round_index % 2 == 1
            for is_dynamic in (first_dynamic, not first_dynamic):
                (dynamic if is_dynamic else plain).extend(block(step, args.steps, is_dynamic))
        calls = 1_000_000
        idle_ns = min(timeit.repeat(mlprof.dynamic.step, number=calls, repeat=5)) / calls * 1e9
        mlprof.dynamic.shutdown()
    plain_ms, dynamic_ms = statistics.median(plain) * 1e3, statistics.median(dynamic) * 1e3
    ratio = dynamic_ms / plain_ms
    print(f"transformer LM, {args.rounds} x {args.steps} steps per configuration")
    print(f"  unprofiled                      {plain_ms:8.2f} ms/step (median)")
    print(f"  dynamic profiling, idle         {dynamic_ms:8.2f} ms/step (median)")
    print(f"  ratio dynamic-idle / unprofiled {ratio:8.4f}  (target <= 1.005: {'ok' if ratio <= 1.005 else 'OVER TARGET'})")
    print(f"  one idle mlprof.dynamic.step()  {idle_ns:8.0f} ns")


if __name__ == "__main__":
    main()
