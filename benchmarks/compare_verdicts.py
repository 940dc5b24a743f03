"""Can `mlprof compare --fail-if-slower` stay on in CI? Its false alarms and detections on default captures.

    python benchmarks/compare_verdicts.py [--pairs 50] [--detect 20] [--levels 5,10,25,100]
                                          [--conditions quiet,busy] [--limit 5] [--job-threads 1]
                                          [--save runs.json]
    python benchmarks/compare_verdicts.py --regroup runs.json [--per-side 3] [--margin PCT]

Every run is `mlprof run --output DIR -- python tests/scenarios/compare_job.py STEPS --extra-pct P`
with mlprof's default options (the window sized by evidence: no --active, no --skip-first); it is
parsed in this process afterwards (the same parse `mlprof run` would start, without its start-up).
Per condition (quiet; busy: two shell loops per core in another session, another job on the host, for
the whole condition):

* **A/A**: a chain of ``--pairs`` + 1 runs of the same code; each run is compared with the one before
  it (``--pairs`` same-code pairs; neighbouring pairs share a run), with `--fail-if-slower LIMIT`: a false
  alarm is exit 9 (``failed``); a verdict ``slower`` is counted too.
* **Detection**: for each level in ``--levels`` (% more work per step: the job's steps run that many more
  identical passes), ``--detect`` runs, each compared with a run of the chain: detected means the
  verdict ``slower``; the gate's exit 9 at LIMIT is counted as well.

Runs are interleaved (a chain run, then one run of each level) so that a drift in the machine's speed
over the minutes touches every kind alike. The job runs ``--job-threads`` torch threads (default 1, as a
job on a shared host should: at torch's default thread count a busy 2-core host stretched its steps
100x, 3 s instead of 30 ms, from spinning workers waiting for each other; 0: torch's default).
Prints one line per comparison as it goes, then the table; ``--save`` keeps every run's per-step
measures (wall, wait for a core, thread CPU) for other analyses.
``--regroup FILE --per-side K`` reads such a file and judges the same runs K per side, as `mlprof
compare BASE_DIR NEW_DIR` would (each run's steps at one host speed when every run has speed probes, the
runs' spread in a pooled t interval, ``compare_runs.RUNS_MIN_CHANGE``): A/A compares chain runs i..i+K-1
with i+K..i+2K-1 for every i (overlapping groups), detection the K regressed runs j..j+K-1 of a level with
the K chain runs recorded beside them. ``--per-side 1`` judges them one per side as `mlprof compare BASE
NEW` does (``stats.CPU_MIN_CHANGE``; without the load checks, which need the parsed tables), and
``--margin PCT`` replaces the margin, to see what another one would have done on the same runs (chosen and
reported on the same runs, such a margin needs a sitting of its own to confirm it).
Exit 0 whatever the result: it measures, it does not gate.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
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
# Steps the job runs: skip 5, warm-up 1, then the default window (2 s of the job's profiled 70-100 ms steps on a quiet
# 2-vCPU machine: 20-30 steps), with a few to spare; and a bound on its time, past
# the window's 60 s cap for slow steps (a busy host), so slow runs do not go on for long.
JOB_STEPS = 50
JOB_MAX_SECONDS = 75


def profile(out: Path, extra_pct: float, threads: int) -> Path:
    cmd = [sys.executable, "-m", "mlprof", "run", "--output", str(out), "--no-parse", "--",
           sys.executable, str(JOB), str(JOB_STEPS), "--extra-pct", f"{extra_pct:g}",
           "--max-seconds", str(JOB_MAX_SECONDS)] + (["--threads", str(threads)] if threads else [])
    # A lock dir of its own: another mlprof run on this host (a test suite) must not refuse ours.
    env = {**os.environ, "MLPROF_LOCK_DIR": str(out.parent / "locks")}
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=env)
    if done.returncode != 0:
        raise RuntimeError(f"mlprof run exit {done.returncode}: {done.stderr.strip()[-300:]}")
    (capture,) = [p for p in out.iterdir() if p.name.endswith("_mlprof")]
    from mlprof.parse import parse_path

    parse_path(capture)
    return capture


def _profiled(out: Path, extra_pct: float, threads: int, label: str) -> Path | None:
    """:func:`profile`, or None with one line when the run failed (counted, never silently dropped)."""
    try:
        return profile(out, extra_pct, threads)
    except (RuntimeError, subprocess.TimeoutExpired) as exc:
        FAILED.append(label)
        print(f"{label}: RUN FAILED: {exc}", flush=True)
        return None


FAILED: list[str] = []


def step_measures(capture: Path) -> dict:
    from mlprof.tables.layout import TABLES_DIR
    from mlprof.tables.store import TableStore

    with TableStore(capture / "mlprof_output" / TABLES_DIR) as store:
        rows = store.rows("SELECT dur_ns, cpu_wait_ns, thread_cpu_ns, cpu_ns, speed_probe_ns FROM steps "
                          "ORDER BY window_index, step")
    return {"wall_ns": [r[0] for r in rows], "wait_ns": [r[1] for r in rows],
            "thread_cpu_ns": [r[2] for r in rows], "process_cpu_ns": [r[3] for r in rows],
            "speed_probe_ns": [r[4] for r in rows]}


def judge(base: Path, new: Path, limit: float) -> dict:
    from mlprof.analysis.compare import compare
    from mlprof.tables.layout import TABLES_DIR
    from mlprof.tables.store import TableStore

    with TableStore(base / "mlprof_output" / TABLES_DIR) as b, TableStore(new / "mlprof_output" / TABLES_DIR) as n:
        result = compare(b, n, top=0)
    v, gate = result.verdict, result.gate(limit)
    return {"verdict": v.verdict, "change_pct": v.change_pct, "low_pct": v.low_pct, "high_pct": v.high_pct,
            "measure": v.measure, "margin_pct": v.margin_pct, "steps": f"{v.base_steps} vs {v.new_steps}",
            "failed": gate.failed, "inconclusive": gate.inconclusive}


def run_condition(condition: str, workdir: Path, pairs: int, detect: int, levels: list[float], limit: float,
                  threads: int, saved: list[dict]) -> list[dict]:
    rows = []
    busy = start_busy(2 * (os.cpu_count() or 1), seconds=4 * 3600) if condition == "busy" else None
    if busy:
        time.sleep(3)  # past the loops' start-up
    previous: Path | None = None
    try:
        for i in range(max(pairs + 1, detect)):
            here = workdir / condition / str(i)
            base = _profiled(here / "chain", 0, threads, f"{condition} {i} chain")
            if base is None:
                continue  # the chain goes on from the run before
            saved.append({"condition": condition, "run": f"{i} chain", "extra_pct": 0, **step_measures(base)})
            compared = [("A/A", 0.0, previous, base)] if previous is not None and i <= pairs else []
            if i < detect:
                for level in levels:
                    label = f"+{level:g}%"
                    new = _profiled(here / f"p{level:g}", level, threads, f"{condition} {i} {label}")
                    if new is None:
                        continue
                    saved.append({"condition": condition, "run": f"{i} {label}", "extra_pct": level,
                                  **step_measures(new)})
                    compared.append((label, level, base, new))
            for label, level, b, n in compared:
                row = {"condition": condition, "pair": i, "kind": label, "extra_pct": level, **judge(b, n, limit)}
                rows.append(row)
                ci = "-" if row["low_pct"] is None else f"{row['low_pct']:+.1f}..{row['high_pct']:+.1f}%"
                change = "-" if row["change_pct"] is None else f"{row['change_pct']:+.1f}%"
                print(f"{condition:<5} {i:>3} {label:<6} {row['verdict']:<12} {change:>8} {ci:<17} "
                      f"gate={'FAIL' if row['failed'] else 'pass'} on {row['measure']} ({row['steps']} steps)",
                      flush=True)
            if previous is not None:
                shutil.rmtree(previous.parent.parent, ignore_errors=True)
            for extra in here.iterdir():
                if extra.name != "chain":
                    shutil.rmtree(extra, ignore_errors=True)
            previous = base
    finally:
        if busy:
            stop_busy(busy)
    return rows


def _run_steps(saved: dict):
    """A saved run as compare's several-run path reads it: (wall steps, steps at one host speed or None)."""
    from mlprof.analysis.compare_speed import steps_at_one_speed

    n = len(saved["wall_ns"])
    probes = saved.get("speed_probe_ns") or [None] * n
    at_speed = steps_at_one_speed([(i, saved["wall_ns"][i], saved["wait_ns"][i], probes[i]) for i in range(n)])
    return saved["wall_ns"], at_speed


def _group_verdict(base: list, new: list, limit: float, margin_pct: float | None = None) -> dict:
    from mlprof.analysis.compare_runs import RUNS_MIN_CHANGE, runs_verdict
    from mlprof.analysis.compare_speed import speed_runs_verdict, speed_verdict
    from mlprof.analysis.stats import CPU_MIN_CHANGE, relative_verdict

    if len(base) == len(new) == 1:
        margin = CPU_MIN_CHANGE if margin_pct is None else margin_pct / 100
        wall = relative_verdict(base[0][0], new[0][0], min_change=margin)
        judged = speed_verdict(wall, base[0][1], new[0][1], min_change=margin)
    else:
        margin = RUNS_MIN_CHANGE if margin_pct is None else margin_pct / 100
        wall = runs_verdict([w for w, _ in base], [w for w, _ in new], min_change=margin)
        judged = speed_runs_verdict(wall, [s for _, s in base], [s for _, s in new], min_change=margin)
    v = judged[0] if judged else wall
    # Comparison.gate's rule: fail on a verdict "slower" whose interval's lower end is above the limit.
    return {"verdict": v.verdict, "failed": v.verdict == "slower" and v.low_pct is not None and v.low_pct > limit,
            "measure": v.measure, "change_pct": v.change_pct}


def regroup(path: Path, per_side: int, limit: float, margin_pct: float | None = None) -> list[str]:
    saved = json.loads(path.read_text())
    rows = []
    for condition in dict.fromkeys(r["condition"] for r in saved):
        by_level: dict[float, list] = {}
        for r in saved:
            if r["condition"] == condition:
                by_level.setdefault(r["extra_pct"], []).append(_run_steps(r))
        chain, k = by_level.get(0.0) or by_level.get(0) or [], per_side
        for i in range(len(chain) - 2 * k + 1):
            rows.append({"condition": condition, "kind": "A/A",
                         **_group_verdict(chain[i:i + k], chain[i + k:i + 2 * k], limit, margin_pct)})
        for level, runs in sorted(by_level.items()):
            if level == 0:
                continue
            for j in range(len(runs) - k + 1):
                rows.append({"condition": condition, "kind": f"+{level:g}%",
                             **_group_verdict(chain[j:j + k], runs[j:j + k], limit, margin_pct)})
    levels = sorted({float(r["kind"][1:-1]) for r in rows if r["kind"] != "A/A"})
    measures = sorted({r["measure"] for r in rows})
    margin = "" if margin_pct is None else f", margin {margin_pct:g}%"
    return ([f"{per_side} runs per side (overlapping groups){margin}, verdicts on: {', '.join(measures)}"]
            + table(rows, levels, limit))


def table(rows: list[dict], levels: list[float], limit: float) -> list[str]:
    lines = [f"| condition | A/A pairs: gate fails (exit 9) at {limit:g}% | A/A: verdict slower | "
             + " | ".join(f"+{lv:g}%: slower (gate fails)" for lv in levels) + " |",
             "|---|---|---|" + "---|" * len(levels)]
    for condition in dict.fromkeys(r["condition"] for r in rows):
        mine = [r for r in rows if r["condition"] == condition]
        aa = [r for r in mine if r["kind"] == "A/A"]
        cells = [f"{sum(r['failed'] for r in aa)}/{len(aa)}", f"{sum(r['verdict'] == 'slower' for r in aa)}/{len(aa)}"]
        for level in levels:
            det = [r for r in mine if r["kind"] == f"+{level:g}%"]
            cells.append(f"{sum(r['verdict'] == 'slower' for r in det)}/{len(det)} "
                         f"({sum(r['failed'] for r in det)}/{len(det)})")
        lines.append(f"| {condition} | " + " | ".join(cells) + " |")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=50, help="same-code pairs per condition (default 50)")
    parser.add_argument("--detect", type=int, default=20, help="regressed runs per level and condition (default 20)")
    parser.add_argument("--levels", default="5,10,25,100", help="regressions to detect, %% more work (default 5,10,25,100)")
    parser.add_argument("--conditions", default="quiet,busy", help="quiet, busy or both (default quiet,busy)")
    parser.add_argument("--limit", type=float, default=5.0, help="--fail-if-slower PCT (default 5, the README's)")
    parser.add_argument("--job-threads", type=int, default=1, help="torch threads of the job (default 1; 0: torch's)")
    parser.add_argument("--save", type=Path, default=None, help="write every run's per-step measures here (JSON)")
    parser.add_argument("--json", action="store_true", help="print the comparisons as JSON at the end")
    parser.add_argument("--regroup", type=Path, default=None, metavar="FILE",
                        help="judge the runs saved in FILE (--save) several per side instead of running anything")
    parser.add_argument("--per-side", type=int, default=3, help="--regroup: runs per side (default 3)")
    parser.add_argument("--margin", type=float, default=None, metavar="PCT",
                        help="--regroup: judge with this margin instead of compare's own")
    args = parser.parse_args(argv)
    if args.regroup:
        print("\n".join(regroup(args.regroup, args.per_side, args.limit, args.margin)))
        return 0
    levels = [float(x) for x in args.levels.split(",") if x.strip()]
    conditions = [c.strip() for c in args.conditions.split(",") if c.strip()]
    if set(conditions) - {"quiet", "busy"}:
        parser.error("--conditions: quiet and/or busy")
    started = time.perf_counter()
    rows, saved = [], []
    with tempfile.TemporaryDirectory(prefix="mlprof-compare-") as tmp:
        for condition in conditions:
            rows += run_condition(condition, Path(tmp), args.pairs, args.detect, levels, args.limit,
                                  args.job_threads, saved)
            if args.save:
                args.save.write_text(json.dumps(saved))
    if args.json:
        print(json.dumps(rows, indent=2))
    print()
    print("\n".join(table(rows, levels, args.limit)))
    if FAILED:
        print(f"\nruns that failed ({len(FAILED)}): {', '.join(FAILED)}")
    print(f"\nelapsed {time.perf_counter() - started:.0f} s, {len(saved)} runs; command: "
          f"python benchmarks/compare_verdicts.py {' '.join(argv if argv is not None else sys.argv[1:])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
