"""Operator analysis (MindSpore Profiler's ``op_analyse``): named ops grouped by input shape.

For each op name asked for, one group per distinct (input shapes, input types):
how often it ran and its time on the host (total, with children, and self)
and on the device (the kernels its runtime calls launched, its own and those of
ops nested in it). Shapes need ``record_shapes=True`` (Level1 and up);
without them every call falls in one group with ``input_shape`` None.

The path form, ``mlprof.op_analyse(path, names)``, is in :mod:`mlprof.workflow`.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

from mlprof.analysis.ops import operator_details
from mlprof.errors import ConfigError
from mlprof.tables.store import TableStore

__all__ = ["OpShapeGroup", "op_analysis", "match_op_names"]


@dataclass(frozen=True)
class OpShapeGroup:
    name: str
    input_shape: list | None  # input shapes, one entry per input ([] for a non-tensor input)
    input_type: list | None  # input dtypes, same order
    occurrences: int
    host_total_ns: int  # with nested ops
    host_avg_ns: float
    host_self_ns: int  # without nested ops
    device_total_ns: int  # kernels launched by it and by ops nested in it
    device_avg_ns: float
    device_self_ns: int  # kernels launched by its own runtime calls

    def to_dict(self) -> dict:
        return asdict(self)


def _json_or_none(text: str | None):
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text


def match_op_names(store: TableStore, wanted: str) -> list[str]:
    """Op names in the tables that ``wanted`` designates.

    The exact name wins; else a case-insensitive match on the full name or on
    the part after ``::`` (``conv2d`` finds ``aten::conv2d``, ``Conv2d`` too).
    """
    names = [r[0] for r in store.rows(
        "SELECT DISTINCT name FROM host_ops WHERE category IN ('cpu_op', 'user_annotation', 'Operator')")]
    if wanted in names:
        return [wanted]
    low = wanted.lower()
    return sorted(n for n in names if n.lower() == low or n.lower().split("::")[-1] == low)


def op_analysis(store: TableStore, names: list[str] | str) -> dict[str, list[OpShapeGroup]]:
    """Per requested name: its shape groups, most host time first. Unknown names map to []."""
    if isinstance(names, str):
        names = [names]
    if not names:
        raise ConfigError("op analysis: give at least one op name")
    details = operator_details(store)
    out: dict[str, list[OpShapeGroup]] = {}
    for wanted in names:
        matched = set(match_op_names(store, wanted))
        groups = []
        for r in details:
            if r["name"] not in matched:
                continue
            n = r["count"]
            groups.append(OpShapeGroup(
                name=r["name"], input_shape=_json_or_none(r["input_dims"]), input_type=_json_or_none(r["input_types"]),
                occurrences=n, host_total_ns=int(r["host_total_ns"] or 0),
                host_avg_ns=(r["host_total_ns"] or 0) / n if n else 0.0, host_self_ns=int(r["host_self_ns"] or 0),
                device_total_ns=int(r["device_total_ns"] or 0),
                device_avg_ns=(r["device_total_ns"] or 0) / n if n else 0.0,
                device_self_ns=int(r["device_self_ns"] or 0)))
        out[wanted] = sorted(groups, key=lambda g: (-g.host_total_ns, g.name))
    return out

