"""``mlprof callsites PATH``: where each phase's host time goes in the user's Python code."""

from __future__ import annotations

import argparse

from mlprof.cli.common import add_common, add_paths, parsed_outputs, print_json, progress_for
from mlprof.tables.phases import HOST_PHASES
from mlprof.tables.store import TableStore
from mlprof.tables.layout import TABLES_DIR
from mlprof.cli.exit_codes import EXIT_OK

__all__ = ["register", "run"]


def register(sub) -> None:
    p = sub.add_parser("callsites", help="the user's Python lines behind each phase's host time",
                       description="Share each phase's host time (forward, Python outside ops, ...) among the "
                                   "lines of the user's code the Python sampler saw running (library frames "
                                   "folded into the user line that called them). Needs python_sampling (on by "
                                   "default in `mlprof run`).")
    add_paths(p)
    p.add_argument("--phase", choices=HOST_PHASES, help="only this phase")
    p.add_argument("--step", type=int, metavar="N", help="only step N")
    p.add_argument("--inclusive", action="store_true",
                   help="count each sample for every line of the user's code on its stack (the loop that calls "
                        "the model, not only the model's forward)")
    p.add_argument("--top", type=int, default=20, metavar="N", help="show the N largest (default 20)")
    add_common(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from mlprof.analysis.call_sites import call_sites, phase_ns

    results = []
    for source, out in parsed_outputs(args.paths, None, progress_for(args)):
        with TableStore(out / TABLES_DIR) as store:
            rows = call_sites(store, args.phase, args.step, inclusive=args.inclusive)
            # An empty answer for one phase is not "no samples": say which phases the samples fell in.
            empty_phase = not rows and args.phase
            sampled = _samples_by_phase(call_sites(store, None, args.step)) if empty_phase else {}
            in_phase_ns = phase_ns(store, args.phase, args.step) if empty_phase and sampled else 0
        result = {"source": source, "call_sites": rows[:args.top], "more": max(len(rows) - args.top, 0)}
        if empty_phase:
            result["samples_by_phase"] = sampled
            result["phase_ns"] = in_phase_ns
        results.append(result)
    if args.json:
        print_json(results[0] if len(results) == 1 else results)
        return EXIT_OK
    for res in results:
        print(res["source"])
        if not res["call_sites"] and res.get("samples_by_phase"):
            where = "the captured steps" if args.step is None else f"step {args.step}"
            phases = ", ".join(f"{phase} ({n})" for phase, n in res["samples_by_phase"].items())
            said = (f"no time of {where} fell in the {args.phase} phase" if not res["phase_ns"] else
                    f"{res['phase_ns'] / 1e6:,.2f} ms of {where} fell in the {args.phase} phase, too little for "
                    "the Python sampler to see")
            print(f"  {said}; the Python samples fell in: {phases}")
            continue
        if not res["call_sites"]:
            print("  no Python samples in the captured steps: profile with `mlprof run` (on by default) or "
                  "ExperimentalConfig(python_sampling=True)")
            continue
        print(f"  {'phase':<14}{'est ms':>10}{'of phase':>10}{'of steps':>10}{'samples':>9}  call site")
        for r in res["call_sites"]:
            print(f"  {r['phase']:<14}{r['est_ns'] / 1e6:>10,.2f}{r['share_of_phase']:>10.0%}"
                  f"{r['share_of_steps']:>10.0%}{r['samples']:>9}  {r['call_site']}")
        if res["more"]:
            print(f"  ... {res['more']} more (--top N)")
        print()
    return EXIT_OK


def _samples_by_phase(rows: list[dict]) -> dict[str, int]:
    """Samples per phase, most first, from :func:`call_sites` rows (each sample counts once, at its site)."""
    counts: dict[str, int] = {}
    for r in rows:
        counts[r["phase"]] = counts.get(r["phase"], 0) + int(r["samples"])
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))
