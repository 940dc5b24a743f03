"""``mlprof compare BASE NEW``: what got faster or slower between two runs."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from mlprof.analysis.compare import Comparison, Delta, compare
from mlprof.cli.common import add_common, finite_float, parsed_outputs, print_json, progress_for
from mlprof.errors import ConfigError
from mlprof.tables.store import TableStore

__all__ = ["register", "run", "EXIT_SLOWER"]

# Exit status when --fail-if-slower trips: distinct from every error status of main.py.
EXIT_SLOWER = 9


def register(sub) -> None:
    p = sub.add_parser("compare", help="compare two runs: step time, breakdown, op types, ops, kernels, memory",
                       description="Align the steps of BASE and NEW (captures, traces or parsed outputs; "
                                   "parsed first when needed) and show what got faster or slower per step, "
                                   "ranked by impact on step time. Deltas are NEW - BASE.")
    p.add_argument("base", type=Path, metavar="BASE")
    p.add_argument("new", type=Path, metavar="NEW")
    p.add_argument("--top", type=int, default=10, help="rows per section in the terminal table (default 10)")
    p.add_argument("--fail-if-slower", type=finite_float, default=None, metavar="PCT",
                   help=f"exit with status {EXIT_SLOWER} when NEW's mean step is more than PCT%% slower than BASE's")
    add_common(p)
    p.set_defaults(run=run)


def _one(path: Path, progress) -> tuple[str, Path]:
    outs = parsed_outputs(path, None, progress)
    if len(outs) != 1:
        raise ConfigError(f"{path}: compare needs one capture or trace per side, found {len(outs)} "
                          "(give one rank's capture, or use `mlprof cluster`)")
    return outs[0]


def _ms(ns: float) -> str:
    return f"{ns / 1e6:,.3f}"


def _pct(d: Delta) -> str:
    return "new" if d.delta_pct is None else f"{d.delta_pct:+.1f}%"


def _table(title: str, rows: list[Delta], top: int, unit: str = "ms") -> list[str]:
    if not rows:
        return []
    conv = _ms if unit == "ms" else (lambda b: f"{b / 2**20:,.1f}")
    lines = [f"{title} (per step, {unit})", f"  {'base':>12} {'new':>12} {'delta':>12} {'change':>8}  name"]
    for d in rows[:top]:
        name = f"{d.name} ({d.detail['view']})" if d.detail.get("view") else d.name
        lines.append(f"  {conv(d.base_ns):>12} {conv(d.new_ns):>12} {conv(d.delta_ns):>12} {_pct(d):>8}  {name}")
    return lines + [""]


def format_comparison(base: str, new: str, c: Comparison, top: int) -> list[str]:
    st = c.step_time
    verdict = "faster" if st.delta_ns < 0 else "slower" if st.delta_ns > 0 else "unchanged"
    lines = [f"base: {base}", f"new:  {new}",
             f"{c.steps} steps aligned by {c.aligned_by}: step time {_ms(st.base_ns)} -> {_ms(st.new_ns)} ms "
             f"({_pct(st)}, {verdict}" + (f", speedup x{c.speedup:.2f})" if c.speedup else ")"), ""]
    lines += _table("Step breakdown", c.breakdown, top)
    lines += _table("Op types", c.op_types, top)
    lines += _table("Ops by input shape", c.ops, top)
    lines += _table("Kernels", c.kernels, top)
    lines += _table("Memory peak", c.memory, top, unit="MiB")
    return lines


def run(args: argparse.Namespace) -> int:
    progress = progress_for(args)
    (base_src, base_out), (new_src, new_out) = _one(args.base, progress), _one(args.new, progress)
    with TableStore(base_out / "tables") as b, TableStore(new_out / "tables") as n:
        result = compare(b, n)
    slower = args.fail_if_slower is not None and result.slower_than(args.fail_if_slower)
    if args.json:
        print_json({"base": base_src, "new": new_src, **result.to_dict(),
                    "fail_if_slower_pct": args.fail_if_slower, "failed": slower})
    else:
        print("\n".join(format_comparison(base_src, new_src, result, args.top)))
    if slower:
        print(f"mlprof compare: new run is {result.step_time.delta_pct:+.1f}% slower per step "
              f"(limit {args.fail_if_slower:g}%)", file=sys.stderr)
        return EXIT_SLOWER
    return 0
