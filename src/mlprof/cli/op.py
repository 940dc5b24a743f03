"""``mlprof op PATH --name NAME``: named ops grouped by input shape (the ``op_analyse`` of the library)."""

from __future__ import annotations

import argparse
import sys

from mlprof.cli.common import add_common, add_paths, parsed_outputs, print_json, progress_for
from mlprof.cli.exit_codes import EXIT_USAGE
from mlprof.tables.store import TableStore
from mlprof.tables.layout import TABLES_DIR

__all__ = ["register", "run"]


def register(sub) -> None:
    p = sub.add_parser("op", help="one op's calls grouped by input shape: count, total, average (host, device)",
                       description="Group the calls of each named op by input shapes and types (needs "
                                   "record_shapes) and show occurrences, total and average time on the host "
                                   "and on the device. A name matches exactly, else case-insensitively with "
                                   "or without its namespace (conv2d finds aten::conv2d).")
    add_paths(p)
    p.add_argument("--name", action="append", required=True, metavar="NAME",
                   help="op name, e.g. aten::conv2d or conv2d (repeat for several; not a comma list, "
                        "as op names may hold commas)")
    add_common(p)
    p.set_defaults(run=run)


def _us(ns: float) -> str:
    return f"{ns / 1000:,.1f}"


def run(args: argparse.Namespace) -> int:
    from mlprof.analysis.op_analyse import op_analysis

    results = []
    for source, out in parsed_outputs(args.paths, None, progress_for(args)):
        with TableStore(out / TABLES_DIR) as store:
            groups = op_analysis(store, args.name)
        results.append({"source": source, "ops": {k: [g.to_dict() for g in v] for k, v in groups.items()}})
    missing = sorted({wanted for res in results for wanted, groups in res["ops"].items() if not groups}
                     - {wanted for res in results for wanted, groups in res["ops"].items() if groups})
    found = [g for res in results for groups in res["ops"].values() for g in groups]
    no_shapes = bool(found) and all(g["input_shape"] is None for g in found)
    status = _report_problems(missing, no_shapes)
    if args.json:
        print_json(results[0]["ops"] if len(results) == 1 else results)
        return status
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
    return status


def _report_problems(missing: list[str], no_shapes: bool) -> int:
    """Say (on stderr) what the tables cannot answer; an op found nowhere is exit 2."""
    if no_shapes:
        print("mlprof op: note: no input shapes were recorded; profile with `mlprof run --level Level1` "
              "(or --record-shapes), or record_shapes=True in the Python API", file=sys.stderr)
    for name in missing:
        print(f"mlprof op: error: no op named {name!r} in the given input(s)", file=sys.stderr)
    return EXIT_USAGE if missing else 0
