"""``mlprof op PATH --name NAME``: named ops grouped by input shape (seed 004's op_analyse)."""

from __future__ import annotations

import argparse
from pathlib import Path

from mlprof.analysis.op_analyse import op_analysis
from mlprof.cli.common import add_common, parsed_outputs, print_json, progress_for
from mlprof.tables.store import TableStore

__all__ = ["register", "run"]


def register(sub) -> None:
    p = sub.add_parser("op", help="one op's calls grouped by input shape: count, total, average (host, device)",
                       description="Group the calls of each named op by input shapes and types (needs "
                                   "record_shapes) and show occurrences, total and average time on the host "
                                   "and on the device. A name matches exactly, else case-insensitively with "
                                   "or without its namespace (conv2d finds aten::conv2d).")
    p.add_argument("path", type=Path, metavar="PATH")
    p.add_argument("--name", action="append", required=True, metavar="NAME", help="op name (repeatable)")
    add_common(p)
    p.set_defaults(run=run)


def _us(ns: float) -> str:
    return f"{ns / 1000:,.1f}"


def run(args: argparse.Namespace) -> int:
    results = []
    for source, out in parsed_outputs(args.path, None, progress_for(args)):
        with TableStore(out / "tables") as store:
            groups = op_analysis(store, args.name)
        results.append({"source": source, "ops": {k: [g.to_dict() for g in v] for k, v in groups.items()}})
    if args.json:
        print_json(results[0]["ops"] if len(results) == 1 else results)
        return 0
    header = ("occurrences", "host total us", "host avg us", "device total us", "device avg us")
    for res in results:
        print(res["source"])
        for wanted, groups in res["ops"].items():
            if not groups:
                print(f"  {wanted}: no such op in this trace")
                continue
            print(f"  {wanted}")
            print("    " + "  ".join(f"{h:>15}" for h in header) + "  input shape / types")
            for g in groups:
                cells = (str(g["occurrences"]), _us(g["host_total_ns"]), _us(g["host_avg_ns"]),
                         _us(g["device_total_ns"]), _us(g["device_avg_ns"]))
                label = f"{g['name']} " if g["name"] != wanted else ""
                print("    " + "  ".join(f"{c:>15}" for c in cells)
                      + f"  {label}{g['input_shape'] if g['input_shape'] is not None else '-'} "
                        f"{g['input_type'] if g['input_type'] is not None else ''}")
        print()
    return 0
