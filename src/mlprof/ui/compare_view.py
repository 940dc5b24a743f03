"""The compare page's answer: ``mlprof.analysis.compare`` plus what the page draws from it.

The page must say what it compares (an op's cost is its kernels' device
time on device runs, its host self time on CPU runs) and show where the
change comes from: waterfalls from the base run's figure to the new run's,
one bar per phase, op type or module. Sections are cut to :data:`TOP` rows for
the tables; waterfalls are computed before the cut, so their "other" bar and
their totals hold every row.
"""

from __future__ import annotations

from mlprof.analysis.compare import compare
from mlprof.analysis.modules import module_tree
from mlprof.errors import ConfigError
from mlprof.analysis.steps import HOST_FIELDS
from mlprof.tables.phases import PHASE_LABELS
from mlprof.ui.stores import OpenRun

__all__ = ["compare_answer", "compare_rows", "COMPARE_SECTIONS", "TOP", "WATERFALL_BARS"]

COMPARE_SECTIONS = ("summary", "step_pairs", "breakdown", "op_types", "ops", "kernels", "memory")
TOP = 50  # rows per table section; ``more`` in the answer counts the rest
WATERFALL_BARS = 12  # largest changes drawn one by one; the rest is one "other" bar
# compare's host breakdown rows are named by their field (host_communication): the phase of each.
_HOST_BREAKDOWN = {field.removesuffix("_ns"): phase for phase, field in HOST_FIELDS.items()}


def _metric(answer: dict) -> dict:
    """What an op's cost means in this comparison, in words (compare() ranks ops by it)."""
    device_view = any(r.get("detail", {}).get("view") == "device" for r in answer["breakdown"])
    if answer.get("cross_device"):
        return {"key": "own_device", "label": "each side's own time per step: kernel time on a device run, "
                                              "host self time on a CPU-only run"}
    if device_view:
        return {"key": "device", "label": "device time of the kernels each op launched, mean per aligned step "
                                          "(host-only ops cost 0 here; their host change is in 'host self Δ')"}
    return {"key": "host_self", "label": "host self time (CPU), mean per aligned step"}


def _waterfall(title: str, base_total: float, new_total: float, deltas: list[tuple[str, float]],
               other_label: str) -> dict:
    ranked = sorted(deltas, key=lambda d: -abs(d[1]))
    bars = [{"name": n, "delta_ns": d} for n, d in ranked[:WATERFALL_BARS] if d]
    rest = sum(d for _, d in ranked[WATERFALL_BARS:])
    if rest:
        bars.append({"name": f"{other_label} ({len(ranked) - WATERFALL_BARS})", "delta_ns": rest})
    return {"title": title, "base_ns": base_total, "new_ns": new_total, "bars": bars}


def _module_waterfall(base: OpenRun, new: OpenRun, steps: tuple[int, int]) -> dict | None:
    """Forward + backward host self time per module path, mean per step."""
    def per_path(run: OpenRun, n: int) -> dict[str, float]:
        return {m.path: (m.self_ns + m.backward_self_ns) / max(n, 1) for m in module_tree(run.store)}
    b, n = per_path(base, steps[0]), per_path(new, steps[1])
    if not b and not n:
        return None
    # Sorted: modules tied on their change keep this order, and a set's changes with string hashing.
    deltas = [(path, n.get(path, 0.0) - b.get(path, 0.0)) for path in sorted(b.keys() | n.keys())]
    return _waterfall("modules: forward + backward host self time per step", sum(b.values()), sum(n.values()),
                      deltas, "other modules")


def compare_answer(base: OpenRun, new: OpenRun) -> dict:
    answer = compare(base.store, new.store, top=None).to_dict()
    answer["metric"] = _metric(answer)
    st = answer["step_time"]
    host = [r for r in answer["breakdown"] if r["detail"].get("view") == "host"]
    phases = [(PHASE_LABELS.get(_HOST_BREAKDOWN.get(r["name"], r["name"]), r["name"]), r["delta_ns"]) for r in host]
    ops = answer["op_types"]
    waterfalls = [_waterfall("step time by phase (host view)", st["base_ns"], st["new_ns"], phases, "other phases"),
                  _waterfall(f"op types: {answer['metric']['label'].split(',')[0]}",
                             sum(r["base_ns"] for r in ops), sum(r["new_ns"] for r in ops),
                             [(r["name"], r["delta_ns"]) for r in ops], "other op types")]
    counts = tuple(int(run.store.rows("SELECT count(*) FROM steps")[0][0]) for run in (base, new))
    modules = _module_waterfall(base, new, counts)  # type: ignore[arg-type]
    if modules:
        waterfalls.append(modules)
    answer["waterfalls"] = waterfalls
    for section in ("breakdown", "op_types", "ops", "kernels", "memory"):
        answer["more"][section] = max(len(answer[section]) - TOP, 0)
        answer[section] = answer[section][:TOP]
    return answer


def _flat_delta(d: dict) -> dict:
    """A Delta as one flat row: detail merged in, distributions as base_median_ns ..., the shift as change_*."""
    nested = ("detail", "base_stats", "new_stats", "change")
    row = {k: v for k, v in d.items() if k not in nested}
    row.update({k: v for k, v in (d.get("detail") or {}).items() if k not in row})
    for side in ("base", "new"):
        for k, v in (d.get(f"{side}_stats") or {}).items():
            row[f"{side}_{k}"] = v
    for k, v in (d.get("change") or {}).items():
        row[f"change_{k}"] = v
    return row


def compare_rows(answer: dict, section: str) -> list[dict]:
    """One section of a comparison as flat rows (what its table shows and its CSV holds)."""
    if section not in COMPARE_SECTIONS:
        raise ConfigError(f"{section!r}: no such comparison section ({', '.join(COMPARE_SECTIONS)})")
    if section == "summary":
        verdict = answer.get("verdict") or {}
        return [{"aligned_by": answer["aligned_by"], "steps": answer["steps"], "speedup": answer["speedup"],
                 "metric": answer["metric"]["label"],
                 **{f"verdict_{k}" if k != "verdict" else k: v for k, v in verdict.items()},
                 "warnings": "; ".join(answer.get("warnings") or []), **_flat_delta(answer["step_time"])}]
    if section == "step_pairs":
        return list(answer["step_pairs"])
    return [_flat_delta(d) for d in answer[section]]
