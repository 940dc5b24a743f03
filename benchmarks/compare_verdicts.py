"""Does `mlprof compare` give the same verdict on a quiet and on a busy machine?

    python benchmarks/compare_verdicts.py [--steps 20] [--repeats 1] [--json]

For each condition (quiet; busy: shell loops on every core in another session,
like another job on the host) it profiles a training loop with `mlprof run`
three times (a base run, the same code again, and the same loop doing twice
the work per step: two micro-batches) and compares the base with each: "no
change" and "2x work". ``--repeats N`` does it all N times. Prints one row per
pair: condition, expected, verdict, change and interval, the measure the verdict
was taken on (wall time, or step time less the wait for a core on a busy host),
then per condition and pair the changes of every repeat.
Exit 0 whatever the result: it measures, it does not gate.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SCENARIOS = HERE.parent / "tests" / "scenarios"
sys.path.insert(0, str(SCENARIOS))

from diagnosis_busy import start_busy, stop_busy  # noqa: E402

JOB = SCENARIOS / "compare_job.py"
PAIRS = (("no change", "same", "no change"), ("2x work", "double", "slower"))


def profile(out: Path, steps: int, micro_batches: int) -> Path:
    cmd = [sys.executable, "-m", "mlprof", "run", "--output", str(out), "--skip-first", "3", "--active", str(steps),
           "--", sys.executable, str(JOB), str(steps + 6), "--micro-batches", str(micro_batches)]
    # A lock dir of its own: another mlprof run on this host (a test suite) must not refuse ours.
    env = {**os.environ, "MLPROF_LOCK_DIR": str(out.parent / "locks")}
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
    if done.returncode != 0:
        raise RuntimeError(f"mlprof run exit {done.returncode}: {done.stderr.strip()[-300:]}")
    (capture,) = [p for p in out.iterdir() if p.name.endswith("_mlprof")]
    return capture


def verdict(base: Path, new: Path) -> dict:
    done = subprocess.run([sys.executable, "-m", "mlprof", "compare", str(base), str(new), "--json"],
                          capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"mlprof compare exit {done.returncode}: {done.stderr.strip()[-300:]}")
    return json.loads(done.stdout)["verdict"]


def run_all(workdir: Path, steps: int, conditions=("quiet", "busy")) -> list[dict]:
    """Per condition three runs (base, the same code again, twice the work), all under the same load;
    both pairs are compared against the one base run."""
    rows = []
    for condition in conditions:
        busy = start_busy(2 * 2, seconds=300) if condition == "busy" else None  # another session: another job
        if busy:
            time.sleep(3)  # past the loops' start-up, so the first run does not meet a different load
        try:
            runs = {mb_label: profile(workdir / condition / mb_label, steps, mb)
                    for mb_label, mb in (("base", 1), ("same", 1), ("double", 2))}
        finally:
            if busy:
                stop_busy(busy)
        for label, new_label, expected in PAIRS:
            v = verdict(runs["base"], runs[new_label])
            measure = "less wait" if "waited for a CPU core (" in v["sentence"] else (
                "cpu time" if "CPU time per step" in v["sentence"] else "wall")
            rows.append({"condition": condition, "pair": label, "expected": expected, "verdict": v["verdict"],
                         "measure": measure,
                         "change_pct": v["change_pct"], "low_pct": v["low_pct"], "high_pct": v["high_pct"],
                         "steps": f"{v['base_steps']} vs {v['new_steps']}", "sentence": v["sentence"],
                         "right": v["verdict"] == expected})
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20, help="profiled steps per run (default 20)")
    parser.add_argument("--repeats", type=int, default=1, help="do every run and comparison N times (default 1)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    rows = []
    for repeat in range(args.repeats):
        with tempfile.TemporaryDirectory(prefix="mlprof-compare-") as tmp:
            rows += [{"repeat": repeat + 1, **r} for r in run_all(Path(tmp), args.steps)]
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(f"{'#':>2}  {'condition':<9}  {'pair':<9}  {'expected':<9}  {'verdict':<12}  {'change':>8}  {'95% CI':<17}  "
          f"{'measure':<9}  steps")
    for r in rows:
        ci = "-" if r["low_pct"] is None else f"{r['low_pct']:+.1f}..{r['high_pct']:+.1f}%"
        change = "-" if r["change_pct"] is None else f"{r['change_pct']:+.1f}%"
        mark = "" if r["right"] else "   <- WRONG"
        print(f"{r['repeat']:>2}  {r['condition']:<9}  {r['pair']:<9}  {r['expected']:<9}  {r['verdict']:<12}  "
              f"{change:>8}  {ci:<17}  {r['measure']:<9}  {r['steps']}{mark}")
    print()
    for condition in dict.fromkeys(r["condition"] for r in rows):
        for label, _, _ in PAIRS:
            picked = [r for r in rows if r["condition"] == condition and r["pair"] == label]
            changes = ", ".join("-" if r["change_pct"] is None else f"{r['change_pct']:+.0f}%" for r in picked)
            print(f"{condition:<9}  {label:<9}  {sum(r['right'] for r in picked)}/{len(picked)} right: {changes}")
    right = sum(r["right"] for r in rows)
    print(f"\n{right} of {len(rows)} verdicts as expected; elapsed {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
