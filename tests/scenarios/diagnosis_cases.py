"""The diagnosis benchmark's cases, how one is run under `mlprof run`, and how its advice is judged.

A case is a scenario of ``diagnosis_jobs.py`` with the advisor finding ids
that name its root cause. Every bottleneck is run twice: as is (judged on its
top finding) and with ``--fixed`` (its twin, judged on false alarms). Controls
are healthy runs judged on false alarms only.

Expected ids a rule does not exist for yet (``slow_dtype``, ``cpu_contention``,
``op_storm``) are the names we would give that rule; such cases count as
misses until it is written.

Judging:
  * a bottleneck is *right* when its top finding (most severe, then largest
    share) is a warning or critical whose id is among the expected ids;
  * a twin or control is a *false alarm* when it has any warning or critical;
  * precision = right / (right + wrong top warnings on bottlenecks + false
    alarms); recall = right / bottlenecks.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from diagnosis_busy import start_busy, stop_busy

__all__ = ["Case", "CASES", "ALARMS", "Run", "Verdict", "runs_of", "run_one", "advise_one", "score", "per_rule",
           "top_finding"]

JOBS = Path(__file__).with_name("diagnosis_jobs.py")
SEVERITY_ORDER = {"critical": 0, "warning": 1, "info": 2}
ALARMS = ("critical", "warning")


@dataclass(frozen=True)
class Case:
    name: str
    expected: tuple[str, ...]  # finding ids naming the root cause; () for a control
    cause: str  # the bottleneck in words
    scenario: str = ""  # diagnosis_jobs.py scenario (default: the case name)
    distributed: bool = False  # 2 gloo ranks under torchrun
    runs_in_one_output: int = 1  # separate runs of the script into the same --output folder
    busy_harness: bool = False  # the harness keeps the machine busy during the run
    # Findings that are true of the machine the control runs on, not of its code: a healthy loop on a
    # busy machine is rightly told that other processes take its cores; any other warning is a false alarm.
    environment: tuple[str, ...] = ()
    threads: int = 1  # the script's intra-op threads; 0: torch's default (one per core)

    @property
    def control(self) -> bool:
        return not self.expected

    @property
    def script_scenario(self) -> str:
        return self.scenario or self.name


CASES: tuple[Case, ...] = (
    Case("loader_getitem", ("data_loading",), "DataLoader num_workers=0, slow __getitem__ augmentation (CNN)"),
    Case("per_sample", ("op_storm", "dominant_module", "host_outside_ops"),
         "model called once per sample in a Python loop (MLP)"),
    # The per-sample loop's cousins, each also at torch's default thread count: the diagnosis must not
    # depend on it (the loop's backward is charged to the loop, docs/attribution.md).
    Case("per_sample_threads", ("op_storm", "dominant_module", "host_outside_ops"),
         "per_sample at torch's default thread count", scenario="per_sample", threads=0),
    Case("per_sample_cnn", ("op_storm", "dominant_module"),
         "conv net applied one image at a time in a for loop appending each output (CNN)"),
    Case("per_sample_cnn_threads", ("op_storm", "dominant_module"),
         "per_sample_cnn at torch's default thread count", scenario="per_sample_cnn", threads=0),
    Case("per_sample_list", ("op_storm", "dominant_module"),
         "list comprehension over the batch unbound into 64 tensors (MLP with LayerNorm and GELU)"),
    Case("per_sample_list_threads", ("op_storm", "dominant_module"),
         "per_sample_list at torch's default thread count", scenario="per_sample_list", threads=0),
    Case("row_dropout", ("dominant_module", "op_storm"), "hand-written dropout, one tiny op per row (MLP)"),
    Case("rnn_cell_loop", ("op_storm", "dominant_module"), "LSTMCell unrolled in Python vs fused nn.LSTM (RNN)"),
    Case("checkpoint_every_step", ("host_outside_ops", "side_work"), "torch.save of the model every step (MLP)"),
    Case("gc_storm", ("gc_pauses",), "gc.collect() every step with a large live heap of Python objects (MLP)"),
    Case("float64_model", ("slow_dtype",), "model and data in float64 (CNN)"),
    Case("sleep_in_loop", ("host_outside_ops", "side_work"), "time.sleep left in the loop (MLP)"),
    Case("log_io", ("host_outside_ops", "side_work"), "per-parameter JSON log written and fsynced every step (CNN)"),
    Case("item_loop", ("op_storm", "synchronization", "host_outside_ops", "side_work"),
         ".item() per element of the logits in a Python loop (MLP)"),
    Case("memory_churn", ("memory_churn",), "large temporary tensors allocated every step (MLP)"),
    Case("cpu_contention", ("cpu_contention",), "busy processes started by the script on all cores (MLP)"),
    Case("oversubscription", ("cpu_oversubscription",), "torch.set_num_threads(8 x cores) + OMP_NUM_THREADS (MLP)"),
    Case("dynamic_shapes", ("dynamic_shapes",), "unbucketed batch size and sequence length (transformer)"),
    Case("optimizer_loop", ("op_storm",), "Adam's per-parameter Python loop over 164 small tensors (foreach off, MLP)"),
    Case("hf_dynamic_seq", ("recompilation", "dynamic_shapes"),
         "Hugging Face GPT-2 compiled with static shapes, called with input_ids=, batches padded to their own "
         "length: a recompile per new length (transformer)"),
    Case("compile_recompiles", ("recompilation",),
         "torch.compile'd loss reads a Python number that changes every step: a recompile per step (MLP)"),
    Case("eval_every_3", ("step_outliers",), "validation pass inside every 3rd step (CNN)"),
    Case("linalg_forward", ("dominant_op",), "torch.linalg.eigh recomputed in every forward (MLP)"),
    Case("sort_forward", ("dominant_op",), "full sort of the embeddings in every forward (embedding model)"),
    Case("slow_rank", ("slow_rank",), "rank 1 of 2 (gloo, DDP) does an extra feature pass", distributed=True),
    Case("anomaly_mlp", ("anomaly_detection",),
         "torch.autograd.set_detect_anomaly(True) left on from debugging (MLP)"),
    Case("anomaly_transformer", ("anomaly_detection",),
         "the loop inside `with torch.autograd.detect_anomaly():` (transformer)"),
    Case("anomaly_cnn_no_nan_check", ("anomaly_detection",),
         "set_detect_anomaly(True, check_nan=False) switched on inside the loop (ResNet-style CNN, AdamW)"),
    # Growth across steps (60 steps each: the memory is judged over the steps after the profiled window).
    Case("kept_eval_loss", ("memory_growth",),
         "held-out loss computed with autograd on and kept as a tensor every step: its graph keeps the "
         "activations alive (MLP)"),
    Case("step_feature_cache", ("memory_growth",), "feature maps cached in a dict keyed by step, graph and all (CNN)"),
    # The buffer grows the process's memory as well as the work; its torch.cat is also the op that leads the step.
    Case("cat_buffer", ("work_growth", "memory_growth", "dominant_op"),
         "embeddings torch.cat'ed onto a running buffer every step to take their mean (MLP)"),
    # The growing scan is Python between ops, which host_outside_ops names by its line too.
    Case("list_scan", ("work_growth", "host_outside_ops", "side_work"),
         "sample ids checked against a Python list of every id seen, scanned every step (MLP)"),
    # Cousins (diagnosis_cousins.py): each class again in another shape, written after its rule.
    Case("loader_collate", ("data_loading",),
         "bag-of-words model whose DataLoader normalizes and hashes every word when a sample is read"),
    Case("deepcopy_model", ("side_work", "host_outside_ops"),
         "copy.deepcopy(model) after every step to keep a weight EMA (MLP)"),
    Case("numpy_metrics", ("side_work", "host_outside_ops"),
         "per-class metrics and a PR curve in Python loops over the batch's rows every step (MLP)"),
    Case("periodic_checkpoint", ("step_outliers", "host_outside_ops", "side_work"), "a 25 MB model saved every 5th step"),
    Case("per_feature_norm", ("op_storm", "dominant_module"), "each feature column standardized in a Python loop"),
    Case("cdist_forward", ("dominant_op",), "all-pairs torch.cdist over an 8x bank in every forward (metric head)"),
    Case("float64_default", ("slow_dtype",), "torch.set_default_dtype(torch.float64) at the top of the script (MLP)"),
    Case("kept_losses", ("memory_growth",),
         "training losses kept as tensors with retain_graph=True: each keeps its graph (transformer)"),
    Case("gc_cycles", ("gc_pauses",), "no gc.collect(): a 400K-entry live heap and per-sample metadata records "
         "kept a few steps make the automatic collector's full collections walk the heap (MLP)"),
    # torch.triu over the fresh mask is an op of its own (51%), named at the mask's line: also right.
    Case("causal_mask", ("memory_churn", "dominant_op"),
         "a 4096 x 4096 causal mask (64 MB) built in every forward (MLP)"),
    Case("pool_contention", ("cpu_contention",),
         "a multiprocessing pool, one worker per core, precomputing features flat out beside training (MLP)"),
    Case("param_histograms", ("side_work", "host_outside_ops"),
         "NumPy histograms of every parameter and gradient written to a file every step (MLP)"),
    Case("slow_rank_data", ("slow_rank",), "rank 1 of 2 (gloo, DDP) parses its shard from text in Python",
         distributed=True),
    Case("clean_mlp", (), "healthy MLP"),
    Case("clean_cnn", (), "healthy CNN"),
    Case("clean_long", (), "healthy wide MLP with Adam, as long as the growth cases: memory rises, then plateaus"),
    Case("two_runs", (), "two separate runs of a healthy MLP in one --output folder", scenario="clean_mlp",
         runs_in_one_output=2),
    Case("busy_machine", (), "healthy MLP while the harness keeps every core busy", scenario="clean_mlp",
         busy_harness=True, environment=("cpu_contention",)),
    Case("deterministic_mlp", (), "healthy MLP with deterministic algorithms and TORCH_SHOW_CPP_STACKTRACES=1 "
         "(costless on a CPU: info only)"),
    Case("clean_transformer", (), "healthy small transformer with AdamW"),
    Case("clean_rnn", (), "healthy fused nn.LSTM classifier"),
)


@dataclass(frozen=True)
class Run:
    case: Case
    fixed: bool  # the twin of a bottleneck

    @property
    def label(self) -> str:
        return f"{self.case.name}--fixed" if self.fixed else self.case.name

    @property
    def judged_on_alarms(self) -> bool:
        return self.fixed or self.case.control


def runs_of(cases) -> list[Run]:
    """Each bottleneck and its twin, then each control once."""
    out: list[Run] = []
    for case in cases:
        out.append(Run(case, fixed=False))
        if not case.control:
            out.append(Run(case, fixed=True))
    return out


@dataclass
class Verdict:
    run: Run
    ok: bool  # the command and the advice both succeeded
    findings: list[dict] = field(default_factory=list)
    mean_step_ms: float | None = None  # the slowest capture's mean step
    wall_s: float = 0.0
    error: str = ""

    @property
    def alarms(self) -> list[dict]:
        return [f for f in self.findings if f.get("severity") in ALARMS and f.get("id") not in self.run.case.environment]

    @property
    def top(self) -> dict | None:
        """The top finding about the code (findings true of the machine, ``Case.environment``, left out)."""
        return top_finding([f for f in self.findings if f.get("id") not in self.run.case.environment])

    @property
    def right(self) -> bool | None:
        """Bottlenecks: the top warning names the cause. Twins and controls: None (judged on alarms)."""
        if self.run.judged_on_alarms:
            return None
        top = self.top
        return bool(self.ok and top and top["severity"] in ALARMS and top["id"] in self.run.case.expected)

    @property
    def false_alarm(self) -> bool:
        return self.run.judged_on_alarms and bool(self.alarms)


def top_finding(findings: list[dict]) -> dict | None:
    """The most severe finding, then the largest share."""
    if not findings:
        return None
    return min(findings, key=lambda f: (SEVERITY_ORDER.get(f.get("severity"), 3), -(f.get("share") or 0.0)))


def profile_command(run: Run, output: Path, job_out: Path, threads: int | None = None) -> list[str]:
    """``threads`` overrides the case's intra-op threads (0: torch's default)."""
    script = [str(JOBS), run.case.script_scenario, "--out", str(job_out)] + (["--fixed"] if run.fixed else [])
    threads = run.case.threads if threads is None else threads
    if threads != 1:
        script += ["--threads", str(threads)]
    if run.case.distributed:
        target = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", *script]
    else:
        target = [sys.executable, *script]
    # mlprof's defaults: the window is what a user gets without an option.
    return [sys.executable, "-m", "mlprof", "run", "--output", str(output), "--", *target]


def run_one(run: Run, workdir: Path, timeout_s: int = 600, threads: int | None = None) -> Verdict:
    """Profile one run unmodified under `mlprof run`, then `mlprof advise --json --no-write` its output."""
    base = workdir / run.label
    output = base / "result"
    # Runs in parallel never share a lock; a crash names its Python frames (every thread's) in the kept stderr.
    env = {**os.environ, "MLPROF_LOCK_DIR": str(base / "locks"), "PYTHONFAULTHANDLER": "1"}
    start = time.perf_counter()
    busy = start_busy(2 * (os.cpu_count() or 1), seconds=120) if run.case.busy_harness else None
    try:
        for i in range(run.case.runs_in_one_output):
            done = subprocess.run(profile_command(run, output, base / f"job_out{i}", threads), env=env,
                                  capture_output=True, text=True, timeout=timeout_s)
            if done.returncode != 0:
                base.mkdir(parents=True, exist_ok=True)
                (base / f"run{i}_stderr.txt").write_text(done.stderr)  # whole: a crash's frames come before its tail
                return Verdict(run, ok=False, wall_s=time.perf_counter() - start,
                               error=f"mlprof run exit {done.returncode} (stderr: {base / f'run{i}_stderr.txt'}): "
                                     f"{done.stderr.strip()[-400:]}")
    except subprocess.TimeoutExpired:
        return Verdict(run, ok=False, wall_s=time.perf_counter() - start, error=f"timed out after {timeout_s}s")
    finally:
        if busy:
            stop_busy(busy)
    return advise_one(run, workdir, timeout_s, start)


def advise_one(run: Run, workdir: Path, timeout_s: int = 600, start: float | None = None) -> Verdict:
    """`mlprof advise --json --no-write` on a run's kept output (``workdir/<label>/result``)."""
    base = workdir / run.label
    output = base / "result"
    env = {**os.environ, "MLPROF_LOCK_DIR": str(base / "locks")}
    start = time.perf_counter() if start is None else start
    if not output.is_dir():
        return Verdict(run, ok=False, error=f"no kept output in {output}")
    try:
        advice = subprocess.run([sys.executable, "-m", "mlprof", "advise", str(output), "--json", "--no-write"],
                                env=env, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return Verdict(run, ok=False, wall_s=time.perf_counter() - start,
                       error=f"mlprof advise timed out after {timeout_s}s")
    wall_s = time.perf_counter() - start
    if advice.returncode != 0:
        return Verdict(run, ok=False, wall_s=wall_s, error=f"mlprof advise exit {advice.returncode}: "
                                                           f"{advice.stderr.strip()[-400:]}")
    entries = json.loads(advice.stdout)
    entries = entries if isinstance(entries, list) else [entries]
    findings = [f for e in entries for f in e.get("findings", [])]
    means = [e["total_step_ns"] / e["step_count"] / 1e6 for e in entries if e.get("step_count")]
    return Verdict(run, ok=True, findings=findings, mean_step_ms=max(means) if means else None, wall_s=wall_s)


def score(verdicts: list[Verdict]) -> dict:
    """Precision and recall over the bottlenecks, with false alarms on twins and controls counted against."""
    bottlenecks = [v for v in verdicts if not v.run.judged_on_alarms]
    right = sum(1 for v in bottlenecks if v.right)
    wrong_alarms = sum(1 for v in bottlenecks if not v.right and v.top and v.top["severity"] in ALARMS)
    false_alarms = sum(1 for v in verdicts if v.false_alarm)
    flagged = right + wrong_alarms + false_alarms
    return {"bottlenecks": len(bottlenecks), "right": right, "wrong_top": wrong_alarms,
            "silent_misses": len(bottlenecks) - right - wrong_alarms,
            "clean_runs": len(verdicts) - len(bottlenecks), "false_alarms": false_alarms,
            "precision": right / flagged if flagged else None,
            "recall": right / len(bottlenecks) if bottlenecks else None}


def per_rule(verdicts: list[Verdict]) -> list[dict]:
    """Per rule: recall over the cases of its class (the first expected id) and precision over every warning
    it raised. A warning is correct on a bottleneck whose expected ids hold it, false on a twin or control
    (findings true of the machine, ``Case.environment``, left out as in ``Verdict.alarms``)."""
    rules: dict[str, dict] = {}

    def row(rule: str) -> dict:
        return rules.setdefault(rule, {"rule": rule, "cases": 0, "right": 0, "warned": 0, "correct": 0})

    for v in verdicts:
        if not v.run.judged_on_alarms:
            r = row(v.run.case.expected[0])
            r["cases"] += 1
            r["right"] += bool(v.right)
        for rule in {f["id"] for f in v.alarms}:
            r = row(rule)
            r["warned"] += 1
            r["correct"] += (not v.run.judged_on_alarms) and rule in v.run.case.expected
    for r in rules.values():
        r["recall"] = r["right"] / r["cases"] if r["cases"] else None
        r["precision"] = r["correct"] / r["warned"] if r["warned"] else None
    return sorted(rules.values(), key=lambda r: (-r["cases"], r["rule"]))
