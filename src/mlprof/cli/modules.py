"""``mlprof modules PATH``: the nn.Module tree with forward, device and backward time."""

from __future__ import annotations

import argparse

from mlprof.cli.common import add_common, add_paths, parsed_outputs, print_json, progress_for
from mlprof.tables.store import TableStore
from mlprof.tables.layout import TABLES_DIR
from mlprof.cli.exit_codes import EXIT_OK

__all__ = ["register", "run"]


def register(sub) -> None:
    p = sub.add_parser("modules", help="nn.Module tree: calls, forward self/total, device and backward time",
                       description="The nn.Module tree of the captured steps, from mlprof's module hooks "
                                   "(on by default in `mlprof run`; record_modules=True in the API): forward "
                                   "calls, host time of the forward (self excludes child modules), device time "
                                   "of the work each module launched, and host time of its backward. Times are "
                                   "per captured step.")
    add_paths(p)
    p.add_argument("--step", type=int, metavar="N", help="only step N (default: mean over the captured steps)")
    p.add_argument("--depth", type=int, metavar="D", help="hide modules nested deeper than D (0 = outermost only)")
    add_common(p)
    p.set_defaults(run=run)


def _ms(ns: float) -> str:
    return f"{ns / 1e6:,.3f}"


def run(args: argparse.Namespace) -> int:
    from mlprof.analysis.modules import module_steps, module_tree

    results = []
    for source, out in parsed_outputs(args.paths, None, progress_for(args)):
        with TableStore(out / TABLES_DIR) as store:
            tree = module_tree(store, args.step)
            steps = module_steps(store, args.step)
        rows = [m.to_dict() for m in tree if args.depth is None or m.depth <= args.depth]
        results.append({"source": source, "steps": steps, "modules": rows})
    if args.json:
        print_json(results[0] if len(results) == 1 else results)
        return EXIT_OK
    header = ("calls/step", "fwd total ms", "fwd self ms", "device ms", "backward ms")
    for res in results:
        print(res["source"])
        if not res["modules"]:
            print("  no module calls recorded: profile with `mlprof run` (on by default) or "
                  "ExperimentalConfig(record_modules=True)")
            continue
        n = res["steps"]
        print(f"  {'module':<48}" + "".join(f"{h:>14}" for h in header) + f"   (per step, {n} step(s))")
        for m in res["modules"]:
            name = "  " * m["depth"] + m["path"].rsplit(".", 1)[-1] + f" ({m['module_type']})"
            cells = (f"{m['calls'] / n:g}", _ms(m["total_ns"] / n), _ms(m["self_ns"] / n),
                     _ms(m["device_total_ns"] / n), _ms(m["backward_total_ns"] / n))
            print(f"  {name[:48]:<48}" + "".join(f"{c:>14}" for c in cells))
        print()
    return EXIT_OK
