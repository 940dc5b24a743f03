"""``mlprof compare BASE NEW``: what got faster or slower between two runs."""

from __future__ import annotations

import argparse
import sys
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

from mlprof.analysis.stats import CPU_MIN_CHANGE, MIN_CHANGE
from mlprof.cli.common import add_common, finite_float, parsed_outputs, print_json, progress_for
from mlprof.cli.exit_codes import EXIT_INCONCLUSIVE, EXIT_OK, EXIT_SLOWER
from mlprof.errors import ConfigError
from mlprof.tables.store import TableStore
from mlprof.tables.layout import TABLES_DIR

if TYPE_CHECKING:
    from mlprof.analysis.compare import Comparison, Delta

__all__ = ["register", "run"]

TERMINAL_TOP = 10


def register(sub) -> None:
    p = sub.add_parser("compare", help="compare two runs: step time, breakdown, op types, ops, kernels, memory",
                       description="Align the steps of BASE and NEW (captures, traces or parsed outputs; "
                                   "parsed first when needed) and show what got faster or slower per step, "
                                   "ranked by impact on step time. Deltas are NEW - BASE.")
    p.add_argument("base", type=Path, metavar="BASE",
                   help="the run to compare against: a capture or trace, or a directory of repeated runs")
    p.add_argument("new", type=Path, metavar="NEW",
                   help="the run to judge: a capture or trace, or a directory of repeated runs")
    p.add_argument("--top", type=int, default=None, metavar="N",
                   help=f"rows per section (default: {TERMINAL_TOP} in the terminal, all with --json); "
                        "the rows left out are counted ('N more', \"more\" in JSON)")
    p.add_argument("--fail-if-slower", type=finite_float, default=None, metavar="PCT",
                   help=f"exit with status {EXIT_SLOWER} when NEW's step time is slower beyond noise and by more "
                        "than PCT%% even at the lower end of the 95%% confidence interval; when the runs cannot "
                        "tell (too few steps or runs), a warning and status 0 (see --strict)")
    p.add_argument("--strict", action="store_true",
                   help=f"with --fail-if-slower: exit with status {EXIT_INCONCLUSIVE} when the runs cannot tell")
    p.add_argument("--min-change", type=finite_float, default=None, metavar="PCT",
                   help=f"smallest step-time change called faster/slower (default {MIN_CHANGE * 100:g}%%, "
                        f"{CPU_MIN_CHANGE * 100:g}%% when both runs computed on the CPU): two runs of the same "
                        "code differ as a whole, whatever the number of steps")
    add_common(p)
    p.set_defaults(run=run)


def _side(path: Path, progress) -> list[tuple[str, Path]]:
    """One run, or several runs of the same code (repeated `mlprof run`s into one directory)."""
    from mlprof.workflow import repeated_runs

    return repeated_runs(path, parsed_outputs(path, None, progress))


_UNITS = (("ms", 1e6), ("us", 1e3), ("ns", 1.0))


def _unit(values) -> tuple[str, float]:
    """One unit for a whole table: the largest value decides (ms, us or ns)."""
    biggest = max((abs(v) for v in values if v is not None), default=0.0)
    return next((u for u in _UNITS if biggest >= 10 * u[1]), _UNITS[-1])


def _num(ns: float, scale: float) -> str:
    return f"{ns / scale:,.3f}" if scale > 1 else f"{ns:,.0f}"


def _pct(d: Delta) -> str:
    if d.presence != "both":
        return d.presence  # "new": absent from BASE; "gone": absent from NEW
    if d.delta_pct is None:
        return "0%" if d.new_ns == d.base_ns else "from 0"
    return f"{d.delta_pct:+.1f}%"


def _table(title: str, rows: list[Delta], top: int, more: int, unit: str = "time") -> list[str]:
    if not rows:
        return []
    shown = rows[:top]
    more += len(rows) - len(shown)
    if unit == "MiB":
        name_u, scale = "MiB", 2**20
    else:
        name_u, scale = _unit(v for d in shown for v in (d.base_ns, d.new_ns, d.delta_ns))

    def conv(value: float) -> str:
        return f"{value / scale:,.1f}" if unit == "MiB" else _num(value, scale)
    with_shift = any(d.change is not None for d in shown)
    lines = [f"{title} (mean per step, {name_u})",
             f"  {'base':>12} {'new':>12} {'delta':>12} {'change':>8}"
             + (f"  {'median shift [95% CI]':>30}" if with_shift else "") + "  name"]
    for d in shown:
        name = f"{d.name} ({d.detail['view']})" if d.detail.get("view") else d.name
        line = f"  {conv(d.base_ns):>12} {conv(d.new_ns):>12} {conv(d.delta_ns):>12} {_pct(d):>8}"
        if with_shift:
            c = d.change
            text = "" if c is None else conv(c.estimate) + (
                f" [{conv(c.low)}..{conv(c.high)}]" if c.low is not None else " [too few steps]")
            line += f"  {text:>30}"
        lines.append(f"{line}  {name}")
    if more:
        lines.append(f"  ... {more} more (--top N to show more; --json lists all)")
    return lines + [""]


def _distribution_lines(c: Comparison) -> list[str]:
    st = c.step_time
    if st.base_stats is None or st.new_stats is None:
        return []
    name_u, scale = _unit([st.base_stats.max_ns, st.new_stats.max_ns])
    lines = [f"step time ({name_u}):  {'median':>10} {'mean':>10} {'IQR':>10} {'MAD':>10} {'min':>10} {'max':>10} "
             f"{'steps':>6}"]
    for label, d in (("base", st.base_stats), ("new", st.new_stats)):
        lines.append(f"  {label:<17}" + " ".join(f"{_num(v, scale):>10}" for v in (
            d.median_ns, d.mean_ns, d.iqr_ns, d.mad_ns, d.min_ns, d.max_ns)) + f" {d.count:>6}")
    return lines


def format_comparison(base: str, new: str, c: Comparison, top: int) -> list[str]:
    st = c.step_time
    dev = {side: f" [{d.label}]" if d else "" for side, d in (("base", c.base_device), ("new", c.new_device))}
    lines = [f"base: {base}{dev['base']}", f"new:  {new}{dev['new']}", *(f"note: {note}" for note in c.notes)]
    if c.verdict is not None:
        lines.append(c.verdict.sentence)
        lines.append(f"verdict taken on: {c.verdict.measure}")
    lines += _distribution_lines(c)
    lines += [f"{c.steps} steps aligned by {c.aligned_by}: mean step {st.base_ns / 1e6:,.3f} -> "
              f"{st.new_ns / 1e6:,.3f} ms ({_pct(st)}" + (f", speedup x{c.speedup:.2f})" if c.speedup else ")")]
    lines += [f"warning: {w}" for w in c.warnings]
    lines.append("")
    lines += _throughput_lines(c)
    more = c.more or {}
    lines += _table("Step breakdown", c.breakdown, top, more.get("breakdown", 0))
    lines += _table("Op types", c.op_types, top, more.get("op_types", 0))
    lines += _table("Ops by input shape", c.ops, top, more.get("ops", 0))
    lines += _table("Kernels (each row from one side when the devices differ)" if c.cross_device else "Kernels",
                    c.kernels, top, more.get("kernels", 0))
    lines += _table("Memory peak", c.memory, top, more.get("memory", 0), unit="MiB")
    return lines


def _throughput_lines(c: Comparison) -> list[str]:
    if not c.throughput:
        return []
    lines = ["Throughput (median per step, higher is better)",
             f"  {'base':>12} {'new':>12} {'change':>8}  {'[95% CI]':>18}  name"]
    for r in c.throughput:
        change = "" if r.change_pct is None else f"{r.change_pct:+.1f}%"
        ci = f"[{r.low_pct:+.1f}%..{r.high_pct:+.1f}%]" if r.low_pct is not None else "[too few steps]"
        lines.append(f"  {r.base_median:>12,.2f} {r.new_median:>12,.2f} {change:>8}  {ci:>18}  {r.name}"
                     + (f" ({r.verdict})" if r.verdict != "inconclusive" else ""))
    return lines + [""]


def run(args: argparse.Namespace) -> int:
    from mlprof.analysis.compare import compare

    from contextlib import ExitStack

    progress = progress_for(args)
    if args.top is not None and args.top < 0:
        raise ConfigError(f"--top: expected a count >= 0, got {args.top}")
    if args.min_change is not None and args.min_change < 0:
        raise ConfigError(f"--min-change {args.min_change:g}: must be >= 0")
    if args.strict and args.fail_if_slower is None:
        raise ConfigError("--strict: goes with --fail-if-slower PCT")
    base_side, new_side = _side(args.base, progress), _side(args.new, progress)
    base_src = base_side[0][0] if len(base_side) == 1 else f"{args.base} ({len(base_side)} runs)"
    new_src = new_side[0][0] if len(new_side) == 1 else f"{args.new} ({len(new_side)} runs)"
    with ExitStack() as stack:
        b = [stack.enter_context(TableStore(out / TABLES_DIR)) for _, out in base_side]
        n = [stack.enter_context(TableStore(out / TABLES_DIR)) for _, out in new_side]
        # The terminal cuts at print time (and counts the rest); JSON keeps all unless --top says otherwise.
        result = compare(b, n, top=args.top if args.json else None,
                         min_change=None if args.min_change is None else args.min_change / 100)
    gate = result.gate(args.fail_if_slower) if args.fail_if_slower is not None else None
    if args.json:
        print_json({"base": base_src, "new": new_src, **result.to_dict(), "top": args.top,
                    "base_runs": [src for src, _ in base_side], "new_runs": [src for src, _ in new_side],
                    "fail_if_slower_pct": args.fail_if_slower, "strict": args.strict,
                    "failed": bool(gate and (gate.failed or (gate.inconclusive and args.strict))),
                    "gate": asdict(gate) if gate else None})
    else:
        print("\n".join(format_comparison(base_src, new_src, result,
                                          TERMINAL_TOP if args.top is None else args.top)))
    if gate is None:
        return EXIT_OK
    if gate.inconclusive and not args.strict:
        print(f"mlprof compare: warning: --fail-if-slower {gate.limit_pct:g}: {gate.reason}; not failing "
              "(--strict fails when the runs cannot tell)", file=sys.stderr)
        return EXIT_OK
    print(f"mlprof compare: --fail-if-slower {gate.limit_pct:g}: {gate.reason}", file=sys.stderr)
    return EXIT_SLOWER if gate.failed else EXIT_INCONCLUSIVE if gate.inconclusive else 0
