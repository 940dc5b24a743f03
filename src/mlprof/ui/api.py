"""The JSON answers of the dashboard's API, as plain functions of a run.

No web framework here: ``server.py`` maps URLs to these functions. Times
inside timeline answers are ns relative to the run's origin (its first
event), because absolute wall-clock ns do not fit in a JavaScript number.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

from mlprof.export.csv_summaries import spreadsheet_safe
from mlprof.analysis.job import job_info
from mlprof.analysis.ops import op_statistic
from mlprof.errors import ConfigError
from mlprof.ui import timeline
from mlprof.ui.datasets import Params, get_dataset
from mlprof.ui.discovery import discover
from mlprof.ui.stores import OpenRun

__all__ = ["runs_answer", "overview_answer", "dataset_rows", "rows_to_csv", "timeline_meta",
           "timeline_window", "timeline_window_rows", "timeline_search", "timeline_event", "advisor_answer", "compare_answer",
           "compare_rows", "COMPARE_SECTIONS", "cluster_members", "cluster_answer", "cluster_rows",
           "CLUSTER_SECTIONS", "FEATURES"]

# Pages whose analyses do not exist yet: the UI says so instead of showing made-up data.
FEATURES = {
    "overview": True, "operators": True, "kernels": True, "step_trace": True, "data_loading": True,
    "memory": True, "timeline": True,
    "advisor": True, "compare": True, "cluster": True, "host_resources": True,
}
CLUSTER_SECTIONS = ("ranks", "step_rows", "slow_ranks", "collectives", "matrix")
COMPARE_SECTIONS = ("summary", "step_pairs", "breakdown", "op_types", "ops", "kernels", "memory")
PIE_SLICES = 9


def runs_answer(logdir: Path) -> dict:
    found = discover(logdir)
    return {"logdir": str(logdir), "runs": [r.to_dict() for r in found.runs],
            "unparsed": [u.to_dict() for u in found.unparsed], "truncated": found.truncated}


def _job(run: OpenRun) -> dict:
    out_dir = run.run_dir
    if out_dir.name == "mlprof_output":
        source = out_dir.parent
    else:  # a trace's output sits beside the trace file: <stem>_mlprof_output
        stem = out_dir.name.removesuffix("_mlprof_output")
        found = [p for p in out_dir.parent.glob(f"{stem}*.json*") if p.is_file() and not p.is_symlink()]
        source = found[0] if found else out_dir
    return job_info(run.store, source, out_dir).to_dict()


def overview_answer(run: OpenRun) -> dict:
    ops = op_statistic(run.store)
    top = ops[:PIE_SLICES]
    rest = ops[PIE_SLICES:]
    pie = [{"name": r["name"], "host_self_ns": r["host_self_ns"]} for r in top]
    if rest:
        pie.append({"name": f"other ({len(rest)} ops)", "host_self_ns": sum(r["host_self_ns"] or 0 for r in rest)})
    steps = dataset_rows(run, "steps", Params())
    total = sum(r["dur_ns"] for r in steps)
    loading = sum(r["data_loading_ns"] for r in steps)
    return {
        "job": _job(run),
        "steps": steps,
        "op_pie": pie,
        "data_loading": {"steps_ns": total, "data_loading_ns": loading,
                         "data_loading_pct": 100.0 * loading / total if total else None},
        "environment": dataset_rows(run, "environment", Params()),
        "advisor": _advisor_or_reason(run),
    }


def _advisor_or_reason(run: OpenRun) -> dict:
    try:
        return advisor_answer(run)
    except ImportError as exc:  # the overview still shows everything else
        return {"available": False, "reason": f"the advisor cannot load: {exc}", "findings": []}


def advisor_answer(run: OpenRun) -> dict:
    # Imported here: a page whose analysis cannot load says so; the others still work.
    from mlprof.analysis.advisor import advise

    report = advise(run.store)
    return {"available": True, **report.to_dict()}


def compare_answer(base: OpenRun, new: OpenRun) -> dict:
    from mlprof.analysis.compare import compare

    # 50 rows a section for the page; ``more`` in the answer counts the rest.
    return compare(base.store, new.store, top=50).to_dict()


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
                 **{f"verdict_{k}" if k != "verdict" else k: v for k, v in verdict.items()},
                 "warnings": "; ".join(answer.get("warnings") or []), **_flat_delta(answer["step_time"])}]
    if section == "step_pairs":
        return list(answer["step_pairs"])
    return [_flat_delta(d) for d in answer[section]]


def dataset_rows(run: OpenRun, name: str, params: Params) -> list[dict]:
    return get_dataset(name).fn(run.store, params)


def rows_to_csv(rows: list[dict]) -> str:
    columns: list[str] = []
    for row in rows:
        for key in row:
            if key not in columns:
                columns.append(key)
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow(["" if row.get(c) is None else spreadsheet_safe(row.get(c)) for c in columns])
    return buf.getvalue()


def _index(run: OpenRun) -> timeline.TimelineIndex:
    index = run.derived.get("timeline")
    if index is None:
        index = timeline.build_index(run.store)
        run.derived["timeline"] = index
    return index  # type: ignore[return-value]


def timeline_meta(run: OpenRun) -> dict:
    index = _index(run)
    origin = index.start_ns or 0
    return {"origin_ns": str(origin), "span_ns": (index.end_ns or origin) - origin,
            "tracks": [t.to_dict() for t in index.tracks], "slice_count": index.slice_count,
            "flow_count": index.flow_count,
            "steps": [{"step": s, "start": a - origin, "end": b - origin} for s, a, b in run.store.rows(
                "SELECT step, start_ns, end_ns FROM steps ORDER BY start_ns")]}


def timeline_window(run: OpenRun, t0_rel: int, t1_rel: int, width_px: int, tracks: list[int] | None) -> dict:
    index = _index(run)
    origin = index.start_ns or 0
    if t1_rel <= t0_rel:
        raise ConfigError("t1 must be greater than t0")
    answer = timeline.query_window(run.store, index, origin + t0_rel, origin + t1_rel, width_px, tracks)
    answer["t0"], answer["t1"] = t0_rel, t1_rel
    del answer["t0_ns"], answer["t1_ns"]
    return answer


def timeline_window_rows(run: OpenRun, answer: dict) -> list[dict]:
    """A window answer as rows (its CSV download): one per slice or merged block, absolute ns."""
    index = _index(run)
    origin = index.start_ns or 0
    tracks = {t.id: t for t in index.tracks}
    s = answer["slices"]
    rows = []
    for i in range(len(s["track"])):
        track = tracks.get(s["track"][i])
        rows.append({"group": track.group if track else None, "track": track.name if track else s["track"][i],
                     "depth": s["depth"][i], "start_ns": origin + answer["t0"] + s["start"][i], "dur_ns": s["dur"][i],
                     "name": answer["names"][s["name"][i]], "count": s["count"][i], "busy_ns": s["busy"][i],
                     "table": timeline.SOURCES[s["src"][i]] if s["src"][i] is not None else None, "id": s["id"][i]})
    return rows


def timeline_search(run: OpenRun, text: str) -> dict:
    index = _index(run)
    origin = index.start_ns or 0
    found = timeline.search(run.store, text)
    for hit in found["hits"]:
        hit["start"] = hit.pop("start_ns") - origin
        hit["end"] = hit.pop("end_ns") - origin
    return found


def timeline_event(run: OpenRun, src: int, row_id: int) -> dict | None:
    index = _index(run)
    found = timeline.event_details(run.store, src, row_id)
    if found is not None:
        found["origin_ns"] = str(index.start_ns or 0)
    return found


def cluster_members(logdir: Path, run_id: str) -> list[str]:
    """The runs of one job: parsed runs whose capture or trace sits in the same folder as ``run_id``'s."""
    def folder(rid: str) -> str:
        parts = rid.split("/")
        # <folder>/<capture>/mlprof_output or <folder>/<trace>_mlprof_output
        return "/".join(parts[:-2] if parts[-1] == "mlprof_output" else parts[:-1])
    mine = folder(run_id)
    return [r.id for r in discover(logdir).runs if folder(r.id) == mine]


def cluster_answer(logdir: Path, run_dirs: dict[str, Path]) -> dict:
    """Cluster report over the ranks among ``run_dirs`` (run id -> output dir); runs without a rank are left out."""
    from mlprof.analysis.cluster import combine
    from mlprof.analysis.cluster_data import rank_data

    ranks = [rank_data(path, source=run_id) for run_id, path in run_dirs.items()]
    with_rank = [r for r in ranks if r["rank"] is not None]
    if len(with_rank) < 2:
        return {"available": False, "members": list(run_dirs),
                "reason": f"{len(with_rank)} run(s) with a rank in this folder; the cluster view needs the "
                          "captures or traces of at least 2 ranks side by side in one folder"}
    report = combine(with_rank).to_dict()
    return {"available": True, "members": [r["source"] for r in with_rank], **report}


def cluster_rows(answer: dict, section: str) -> list[dict]:
    if section not in CLUSTER_SECTIONS:
        raise ConfigError(f"{section!r}: no such cluster section ({', '.join(CLUSTER_SECTIONS)})")
    return list(answer.get(section, [])) if answer["available"] else []
