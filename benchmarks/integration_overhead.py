"""What the trainer integrations cost the training loop per call, outside and inside capture windows.

    python benchmarks/integration_overhead.py [--calls 20000]

Times, with ``time.perf_counter_ns`` around many calls, on this machine:
``mlprof.log_scalar`` with no session and with one recording; a session's
step boundary (what ``MlprofCallback.on_step_end`` and Lightning's optimizer
step cost) outside a window; the ``MlprofProfiler.start``/``stop`` pair
Lightning calls around each of its actions (some 30 per batch), outside and
inside a window (Level_none, so torch's own profiler cost is not counted).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path


def per_call_ns(func, calls: int, rounds: int = 5) -> float:
    samples = []
    for _ in range(rounds):
        start = time.perf_counter_ns()
        for _ in range(calls):
            func()
        samples.append((time.perf_counter_ns() - start) / calls)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20000)
    args = parser.parse_args()
    import mlprof
    from mlprof.collect.trainer_session import TrainerSession
    from mlprof.collect.training_config import trainer_run_options

    n = args.calls
    print(f"log_scalar, no session:         {per_call_ns(lambda: mlprof.log_scalar('loss', 1.0), n):8.0f} ns/call")
    with tempfile.TemporaryDirectory() as tmp:
        options = trainer_run_options(str(Path(tmp) / "prof"), start_step=10**9, active=1, level="Level_none",
                                      host_sys="", python_sampling=False, record_modules=False)
        session = TrainerSession(options, integration="benchmark", analyse=False)
        session.start(1)
        # Few enough values that no segment is written during the measurement.
        print(f"log_scalar, recording:          {per_call_ns(lambda: mlprof.log_scalar('loss', 1.0), 5000, 3):8.0f} "
              "ns/call")
        print(f"step boundary, outside windows: {per_call_ns(lambda: session.end_step(8, 256), 2000, 3):8.0f} "
              "ns/step (2 scalars recorded each)")
        session.stop()

        from mlprof.integrations.lightning import MlprofProfiler

        for label, start_step in (("outside windows", 10**9), ("inside a window", 1)):
            profiler = MlprofProfiler(dirpath=Path(tmp) / label.replace(" ", "_"), start_step=start_step,
                                      active=10**6, analyse=False, level="Level_none", host_sys="",
                                      python_sampling=False, record_modules=False)
            profiler.session = TrainerSession(profiler.options, integration="lightning", analyse=False)
            profiler.session.start(1)
            profiler._stage = "validate"  # ranges only: no step boundary on this action

            def action(p=profiler) -> None:
                p.start("[LightningModule]Model.on_train_batch_start")
                p.stop("[LightningModule]Model.on_train_batch_start")

            print(f"Lightning action, {label}: {per_call_ns(action, 5000, 3):8.0f} ns/action")
            profiler.teardown("validate")


if __name__ == "__main__":
    main()
