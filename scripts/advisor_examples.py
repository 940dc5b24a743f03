"""Writes docs/advisor_examples.md: one worked example per advisor rule, from real runs.

    python scripts/advisor_examples.py DIAG_DIR [--shared ../shared/data] [--out docs/advisor_examples.md]

DIAG_DIR holds the runs `benchmarks/diagnosis.py --keep DIAG_DIR` left; rules
that need another recording option get a run of their own here (a diagnosis
scenario under `mlprof run` with that option); rules the CPU scenarios cannot
show (GPU and NPU ones) come from the real traces in the shared data folder
(copied to a temporary folder first: parsing writes beside its input). Each
example is the finding as `mlprof advise` prints it.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from mlprof.analysis.advisor import Thresholds
from mlprof.workflow import advise as advise_path
from mlprof.cli.advise import format_report

# rule id -> (where the example comes from, what the run is)
FROM_DIAGNOSIS = {
    "op_storm": ("per_sample", "a model applied sample by sample in a Python loop"),
    "dominant_op": ("sort_forward", "a forward pass that sorts every activation row"),
    "slow_dtype": ("float64_model", "a small CNN trained in float64"),
    "memory_churn": ("memory_churn", "a 64 MB tensor created with torch.zeros every step"),
    "data_loading": ("loader_getitem", "a Dataset whose __getitem__ augments in pure Python, num_workers=0"),
    "gc_pauses": ("gc_storm", "gc.collect() after every step with many live objects"),
    "host_outside_ops": ("checkpoint_every_step", "torch.save of the model every step"),
    "step_outliers": ("eval_every_3", "an evaluation pass every third step"),
    "dynamic_shapes": ("dynamic_shapes", "batches of random size and sequence length"),
    "cpu_contention": ("cpu_contention", "the job starts shell loops on every core"),
    "cpu_oversubscription": ("oversubscription", "torch.set_num_threads(8 x cores)"),
    "slow_rank": ("slow_rank", "two gloo ranks under torchrun; rank 1 does extra work"),
    "communication_overlap": ("slow_rank", "the waiting rank of the same job"),
    "recompilation": ("compile_recompiles", "a torch.compile'd loss that reads a Python number changing every step"),
    "anomaly_detection": ("anomaly_mlp", "torch.autograd.set_detect_anomaly(True) left on from debugging"),
    "debug_environment": ("deterministic_mlp", "TORCH_SHOW_CPP_STACKTRACES=1 set by the script"),
    "deterministic_algorithms": ("deterministic_mlp", "torch.use_deterministic_algorithms(True) on a CPU"),
    "work_growth": ("cat_buffer", "embeddings torch.cat'ed onto a running buffer every step"),
}
# rule id -> (diagnosis scenario, extra `mlprof run` options, what the run is): run here.
FROM_RUN = {
    "dominant_module": ("row_dropout", ["--with-stack"],
                        "a hand-written dropout, one tiny op per row, recorded with --with-stack"),
    "memory_growth": ("kept_eval_loss", ["--profile-memory"],
                      "a held-out loss computed with autograd on and kept as a tensor every step, recorded with "
                      "--profile-memory"),
}
JOBS = Path(__file__).resolve().parents[1] / "tests" / "scenarios" / "diagnosis_jobs.py"
ASCEND_RANK0 = "ascend/alexnet_ddp_910b/text/level1/rank0_ascend_pt"


def _ai_cpu_capture(shared: Path, tmp: Path) -> tuple[Path, str]:
    """The real AlexNet rank-0 output with its largest compute op type moved to the AI CPU (none of the
    real run's ops ran there): what a job whose op lacks an AI Core kernel for its dtype records."""
    root = tmp / "ai_cpu" / "rank0_ascend_pt"
    shutil.copytree(shared / ASCEND_RANK0, root, ignore=shutil.ignore_patterns("mlprof_output"))
    path = root / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
    with open(path, newline="") as fh:
        rows = list(csv.reader(fh))
    head = rows[0]
    kind, core, dur = head.index("Type"), head.index("Accelerator Core"), head.index("Duration(us)")
    totals: dict[str, float] = {}
    for row in rows[1:]:
        if row[core].startswith("AI_"):  # AI_CORE / AI_VECTOR_CORE: compute, not communication
            totals[row[kind]] = totals.get(row[kind], 0.0) + float(row[dur] or 0)
    moved = max(totals, key=totals.get)
    for row in rows[1:]:
        if row[kind] == moved:
            row[core] = "AI_CPU"
    with open(path, "w", newline="") as fh:
        csv.writer(fh).writerows(rows)
    return root, moved


def _allocating_trace(tmp: Path) -> Path:
    """A hand-built Kineto trace of 4 CUDA steps of 10 ms, each calling cudaMalloc for 800 us and
    torch.cuda.empty_cache once: the shape of the golden test, as no shared GPU trace allocates in its steps."""
    events = []
    for i in range(4):
        t0 = i * 10_000
        events += [
            {"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{i + 1}", "pid": 10, "tid": 11, "ts": t0,
             "dur": 10_000},
            {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 10, "tid": 11, "ts": t0 + 100, "dur": 300,
             "args": {"External id": 100 + i}},
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 10, "tid": 11, "ts": t0 + 150,
             "dur": 50, "args": {"correlation": 100 + i, "External id": 100 + i}},
            {"ph": "X", "cat": "kernel", "name": "gemm_kernel", "pid": 0, "tid": 7, "ts": t0 + 500, "dur": 8_000,
             "args": {"correlation": 100 + i, "device": 0, "stream": 7}},
            {"ph": "X", "cat": "python_function", "name": "torch/cuda/memory.py(192): empty_cache", "pid": 10,
             "tid": 11, "ts": t0 + 1_000, "dur": 100},
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaMalloc", "pid": 10, "tid": 11, "ts": t0 + 5_000,
             "dur": 800, "args": {"correlation": 200 + i}},
        ]
    path = tmp / "allocating" / "allocating.pt.trace.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"schemaVersion": 1, "baseTimeNanoseconds": 1_700_000_000_000_000_000,
                                "traceEvents": events}))
    return path
FROM_SHARED = {
    "device_idle": ("traces/amd_trace", "a ROCm toy model on an MI250"),
    "npu_op_compile": ("ascend/alexnet_ddp_910b/text/level1", "AlexNet DDP on Ascend 910B"),
    "synchronization": ("ascend/alexnet_ddp_910b/text/level1", "AlexNet DDP on Ascend 910B"),
}


def _record(scenario: str, options: list[str], out: Path) -> Path:
    """The scenario profiled under `mlprof run` with ``options``; its capture's folder."""
    cmd = [sys.executable, "-m", "mlprof", "run", "--output", str(out), "--skip-first", "2", "--active", "5",
           *options, "--", sys.executable, str(JOBS), scenario, "--out", str(out / "job")]
    env = {**os.environ, "MLPROF_LOCK_DIR": str(out / "locks")}
    subprocess.run(cmd, check=True, capture_output=True, timeout=600, env=env)
    (capture,) = out.glob("*_mlprof")
    return capture


def _example(path: Path, rule: str, thresholds: Thresholds | None = None) -> list[str] | None:
    best = None
    for report in advise_path(path, thresholds):
        for f in report.findings:
            if f.id == rule and (best is None or (f.severity, f.share) > (best[1].severity, best[1].share)):
                best = (report, f)
    if best is None:
        return None
    report, finding = best
    one = dataclasses.replace(report, findings=[finding], notes=[], explained=None)
    lines = format_report(Path(report.source or path).name, one)
    return [line for line in lines[1:] if line.strip()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("diag_dir", type=Path)
    parser.add_argument("--shared", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data")
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parents[1] / "docs" / "advisor_examples.md")
    args = parser.parse_args(argv)
    out = ["# The advisor's rules, one worked example each", "",
           "Generated by `python scripts/advisor_examples.py DIAG_DIR` from real runs: the CPU scenarios of the",
           "diagnosis benchmark (docs/diagnosis.md, run unmodified under `mlprof run`) and the real GPU and NPU",
           "traces in the shared data folder. Each block is the finding exactly as `mlprof advise PATH` prints it;",
           "docs/analysis.md says what each rule measures and its thresholds. Rules without an example here:",
           "see the end.", ""]
    missing = []
    with tempfile.TemporaryDirectory(prefix="mlprof-examples-") as tmp:
        runs = {rule: (scenario, what) for rule, (scenario, _, what) in FROM_RUN.items()}
        for rule, (where, what) in {**FROM_DIAGNOSIS, **runs, **FROM_SHARED}.items():
            if rule in FROM_DIAGNOSIS:
                path, origin = args.diag_dir / where / "result", f"diagnosis scenario `{where}`"
            elif rule in FROM_RUN:
                options = FROM_RUN[rule][1]
                path = _record(where, options, Path(tmp) / rule)
                origin = f"diagnosis scenario `{where}`, `mlprof run {' '.join(options)}`"
            else:
                path = Path(tmp) / where.replace("/", "_")
                if not path.exists():
                    shutil.copytree(args.shared / where, path)
                origin = f"shared data `{where}`"
            lines = _example(path, rule) if path.exists() else None
            if not lines:
                missing.append(f"`{rule}` ({origin}: no such finding in this run)")
                continue
            out += [f"## `{rule}`", "", f"{what[0].upper()}{what[1:]} ({origin}).", "", "```", *lines, "```", ""]
        if (args.shared / ASCEND_RANK0).is_dir():
            path, moved = _ai_cpu_capture(args.shared, Path(tmp))
            lines = _example(path, "ai_cpu_ops", Thresholds.from_overrides(["ai_cpu_warn_share=0.01"]))
            what = (f"AlexNet DDP on Ascend 910B, rank 0 (shared data `{ASCEND_RANK0}`), with its largest compute op "
                    f"type, {moved}, moved to the AI CPU in kernel_details.csv (the real run has no AI CPU op), "
                    "advised with `--threshold ai_cpu_warn_share=0.01`: the moved op keeps its AI Core duration, "
                    "1% of a step that is two thirds all-reduce, where a real AI CPU fallback runs many times slower")
            out += ["## `ai_cpu_ops`", "", f"{what}.", "", "```", *(lines or ["(no finding)"]), "```", ""]
        lines = _example(_allocating_trace(Path(tmp)), "memory_churn")
        out += ["## `memory_churn` (device allocator)", "",
                "A hand-built Kineto trace of four 10 ms CUDA steps, each calling `cudaMalloc` for 0.8 ms and "
                "`torch.cuda.empty_cache()` once (`scripts/advisor_examples.py`): no GPU was lent to this "
                "project's docs and no shared GPU trace allocates inside its steps.", "",
                "```", *(lines or ["(no finding)"]), "```", ""]
    if missing:
        out += ["## Not shown", "", *[f"* {m}" for m in missing], ""]
    args.out.write_text("\n".join(out))
    print(f"wrote {args.out} ({len(out)} lines)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
