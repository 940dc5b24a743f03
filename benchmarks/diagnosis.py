"""The diagnosis benchmark: does the advisor name the bottleneck, and stay quiet on healthy runs?

    python benchmarks/diagnosis.py [--only NAME ...] [--threads N] [--ignore ID] [--jobs N] [--keep DIR] [--json]
    python benchmarks/diagnosis.py --rejudge DIR     # advise the captures kept by --keep DIR again

Runs every case of ``tests/scenarios/diagnosis_cases.py`` (each bottleneck, its
fixed twin, and the clean controls) unmodified under ``mlprof run``, asks
``mlprof advise --json --no-write`` about each output and prints one row per
run: scenario, expected cause, top finding, right/wrong (bottlenecks) or
false alarm (twins and controls), mean step time; then precision and recall,
and recall per class and precision per rule.
See docs/diagnosis.md. Exit code 0 even when the advisor is wrong: this
measures it, it does not gate it.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "scenarios"))

from diagnosis_cases import CASES, Verdict, advise_one, per_rule, run_one, runs_of, score  # noqa: E402


def _top(v: Verdict) -> str:
    if not v.ok:
        return "ERROR"
    top = v.top
    if top is None:
        return "-"
    return f"{top['id']} ({top['severity']}, {100 * (top.get('share') or 0):.0f}%)"


def _judgement(v: Verdict) -> str:
    if not v.ok:
        return "error"
    if v.run.judged_on_alarms:
        return "FALSE ALARM: " + ",".join(sorted({f["id"] for f in v.alarms})) if v.false_alarm else "quiet"
    return "right" if v.right else "WRONG"


def table(verdicts: list[Verdict]) -> list[str]:
    rows = [("run", "expected", "top finding", "judged", "step ms")]
    for v in verdicts:
        expected = "(clean)" if v.run.judged_on_alarms else "|".join(v.run.case.expected)
        step = f"{v.mean_step_ms:.1f}" if v.mean_step_ms is not None else "-"
        rows.append((v.run.label, expected, _top(v), _judgement(v), step))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return lines


def summary(verdicts: list[Verdict]) -> list[str]:
    s = score(verdicts)
    pct = lambda x: "n/a" if x is None else f"{100 * x:.0f}%"  # noqa: E731
    lines = [f"bottlenecks: {s['bottlenecks']}, right {s['right']}, wrong top warning {s['wrong_top']}, "
             f"silent {s['silent_misses']}; twins and controls: {s['clean_runs']}, false alarms {s['false_alarms']}",
             f"precision {pct(s['precision'])}, recall {pct(s['recall'])}"]
    slower = [v.run.case.name for v in verdicts if v.run.fixed and v.mean_step_ms is not None and any(
        b.run.case is v.run.case and not b.run.fixed and b.mean_step_ms is not None
        and b.mean_step_ms <= v.mean_step_ms for b in verdicts)]
    if slower:
        lines.append("twins not faster than their bottleneck in this run: " + ", ".join(slower))
    errors = [f"{v.run.label}: {v.error}" for v in verdicts if not v.ok]
    return lines + [f"error {e}" for e in errors]


def rule_table(verdicts: list[Verdict]) -> list[str]:
    """Recall per class of bottleneck, precision per rule over every warning it raised."""
    pct = lambda x: "-" if x is None else f"{100 * x:.0f}%"  # noqa: E731
    rows = [("rule", "cases", "right", "recall", "warned", "correct", "precision")]
    rows += [(r["rule"], str(r["cases"]), str(r["right"]), pct(r["recall"]), str(r["warned"]), str(r["correct"]),
              pct(r["precision"])) for r in per_rule(verdicts)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return lines


def with_machine_findings(runs: list, ignore: list[str]) -> list:
    """Judge without findings true of the machine, not the code (cpu_contention on a shared host)."""
    if not ignore:
        return runs
    out = []
    for r in runs:
        machine = tuple(i for i in ignore if i not in r.case.expected)  # a case about it is judged on it
        out.append(replace(r, case=replace(r.case, environment=tuple(dict.fromkeys(r.case.environment + machine)))))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", action="append", default=[], metavar="NAME",
                        help="run only this case (its bottleneck and twin); repeatable")
    parser.add_argument("--jobs", type=int, default=1, help="runs at a time (default 1: timings stay honest)")
    parser.add_argument("--keep", type=Path, default=None, help="keep the captures in DIR (default: a temp dir)")
    parser.add_argument("--json", action="store_true", help="print the verdicts and the score as JSON")
    parser.add_argument("--threads", type=int, default=None, metavar="N",
                        help="every job's intra-op threads (0: torch's default; default: each case's own, 1 "
                             "except the *_threads cousins)")
    parser.add_argument("--ignore", action="append", default=[], metavar="ID",
                        help="judge without this finding id, true of a shared machine rather than the code "
                             "(e.g. cpu_contention); repeatable, and said in the output")
    parser.add_argument("--rejudge", type=Path, default=None, metavar="DIR",
                        help="run no job: advise the outputs an earlier --keep DIR left, with today's advisor")
    args = parser.parse_args(argv)
    known = {c.name for c in CASES}
    unknown = sorted(set(args.only) - known)
    if unknown:
        parser.error(f"unknown case(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    runs = with_machine_findings(runs_of([c for c in CASES if not args.only or c.name in args.only]), args.ignore)
    started = time.perf_counter()
    if args.rejudge:
        with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            verdicts = list(pool.map(lambda r: advise_one(r, args.rejudge), runs))
        return report(verdicts, time.perf_counter() - started, args)
    with tempfile.TemporaryDirectory(prefix="mlprof-diagnosis-") as tmp:
        workdir = args.keep or Path(tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            verdicts = list(pool.map(lambda r: run_one(r, workdir, threads=args.threads), runs))
    return report(verdicts, time.perf_counter() - started, args)


def report(verdicts: list[Verdict], elapsed: float, args: argparse.Namespace) -> int:
    if args.json:
        print(json.dumps({"score": score(verdicts), "elapsed_s": round(elapsed, 1), "runs": [
            {"run": v.run.label, "expected": list(v.run.case.expected), "ok": v.ok, "error": v.error,
             "top": v.top, "right": v.right, "false_alarm": v.false_alarm, "mean_step_ms": v.mean_step_ms,
             "alarms": [f["id"] for f in v.alarms]} for v in verdicts], "rules": per_rule(verdicts),
            "threads": args.threads, "ignored": args.ignore}, indent=2, default=str))
        return 0
    print("\n".join(table(verdicts)))
    print()
    print("\n".join(summary(verdicts)))
    print()
    print("\n".join(rule_table(verdicts)))
    if args.ignore:
        print("judged without " + ", ".join(args.ignore) + " (true of the machine, not the code)")
    print(f"elapsed {elapsed:.0f} s for {len(verdicts)} runs (--jobs {args.jobs})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
