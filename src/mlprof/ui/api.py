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
from mlprof.analysis.gpu_metrics import gpu_metrics
from mlprof.analysis.job_info import job_info
from mlprof.analysis.step_categories import CATEGORIES, CATEGORY_LABELS
from mlprof.analysis.steps import DEVICE_FIELDS, HOST_FIELDS, IDLE_FIELDS
from mlprof.errors import ConfigError
from mlprof.tables.phases import CAUSE_LABELS, HOST_PHASES, IDLE_CAUSES, PHASE_LABELS
from mlprof.ui import events, timeline
from mlprof.ui.answer_cache import cached_answer, tables_signature
from mlprof.ui.cluster_view import folder_of
from mlprof.ui.datasets import Params, get_dataset
from mlprof.outputs import source_of
from mlprof.ui.discovery import discover
from mlprof.ui.stores import OpenRun
from mlprof.ui.run_summaries import SummaryCache, features
from mlprof.tables.layout import TABLES_DIR

__all__ = ["runs_answer", "features_answer", "overview_answer", "advisor_or_reason", "advisor_key", "dataset_rows",
           "rows_to_csv", "timeline_meta",
           "timeline_window", "timeline_window_rows", "timeline_range", "timeline_search", "timeline_event",
           "timeline_locate",
           "advisor_answer"]


def runs_answer(logdir: Path, summaries: SummaryCache | None = None) -> dict:
    """Every parsed run with its summary (job, rank, device, steps, step time), and the inputs not parsed yet."""
    summaries = summaries or SummaryCache()
    found = discover(logdir)
    runs = []
    for r in found.runs:
        summary = summaries.get(logdir / r.id if r.id != "." else logdir)
        runs.append({**r.to_dict(), **{k: v for k, v in summary.items() if k not in ("counts", "step_numbers")},
                     "folder": folder_of(r.id)})
    return {"logdir": str(logdir), "runs": runs,
            "unparsed": [u.to_dict() for u in found.unparsed], "truncated": found.truncated}


def job_members(logdir: Path, run_id: str, summaries: SummaryCache) -> list[dict]:
    """The ranks of this run's job: runs with a rank whose capture or trace sits in the same folder
    (and whose world size agrees), as [{id, rank, dir}]; empty unless there are at least 2."""
    mine = folder_of(run_id)
    me = summaries.get(logdir / run_id if run_id != "." else logdir)
    out = []
    for r in discover(logdir).runs:
        if folder_of(r.id) != mine:
            continue
        path = logdir / r.id if r.id != "." else logdir
        s = summaries.get(path)
        if s.get("rank") is None or (me.get("world_size") and s.get("world_size")
                                     and s["world_size"] != me["world_size"]):
            continue
        out.append({"id": r.id, "rank": s["rank"], "dir": path})
    out.sort(key=lambda x: (x["rank"], x["id"]))
    return out if len(out) >= 2 else []


def dataset_catalog() -> dict:
    """The datasets by title, and those that show one op's or kernel's rows ("op", "kernel": they need name=)."""
    from mlprof.ui.datasets import DATASETS

    return {"datasets": {name: d.title for name, d in DATASETS.items()},
            "dataset_names": {name: d.needs_name for name, d in DATASETS.items() if d.needs_name}}


def features_answer(logdir: Path, run_id: str, summaries: SummaryCache) -> dict:
    """Which pages have data for this run, and why not; the ranks of its job (the header's rank switcher)."""
    ranks = job_members(logdir, run_id, summaries)
    me = summaries.get(logdir / run_id if run_id != "." else logdir)
    return {"features": features(me, len(ranks)), "ranks": [{"id": x["id"], "rank": x["rank"]} for x in ranks],
            "summary": {k: v for k, v in me.items() if k != "counts"}, "phases": PHASES, **dataset_catalog()}


# The step columns the pages draw, named once from the attribution's own labels (mlprof.tables.phases):
# [steps dataset field, label, colour key]. The device view is step_breakdown's (computing holds copies too).
PHASES = {
    "host": [[HOST_FIELDS[p], PHASE_LABELS[p], p] for p in HOST_PHASES],
    "device": [[field, label, field.removesuffix("_ns")] for field, label in DEVICE_FIELDS.items()],
    "idle": [[IDLE_FIELDS[c], CAUSE_LABELS[c], c] for c in IDLE_CAUSES],
}


def _job(run: OpenRun) -> dict:
    out_dir = run.run_dir
    # parse_info.json records the input; globbing for a trace of a similar name would only guess it.
    return job_info(run.store, Path(source_of(out_dir)), out_dir).to_dict()


def overview_answer(run: OpenRun, step: int | None = None, advisor: dict | None = None) -> dict:
    """Headline numbers, the step-time breakdown by category, GPU figures and the advisor's findings
    (``advisor``: :func:`advisor_or_reason`, computed by the caller outside the run's lock)."""
    from mlprof.analysis.devices import run_device

    cats = dataset_rows(run, "step_categories", Params(step=step))
    n = len(cats)
    durs = sorted(r["dur_ns"] for r in cats)
    mean = {c: sum(r[f"{c}_ns"] for r in cats) / n for c in CATEGORIES} if n else {}
    steps = dataset_rows(run, "steps", Params(step=step))
    total = sum(r["dur_ns"] for r in steps)
    loading = sum(r["data_loading_ns"] for r in steps)
    return {
        "job": _job(run),
        "device": run_device(run.store).to_dict(),
        "step_count": n,
        "mean_step_ns": sum(durs) / n if n else None,
        "median_step_ns": (durs[(n - 1) // 2] + durs[n // 2]) / 2 if n else None,
        "categories": [{"key": c, "label": CATEGORY_LABELS[c], "mean_ns": mean[c],
                        "share": mean[c] / (sum(durs) / n) if n and sum(durs) else None} for c in CATEGORIES] if n
        else [],
        "category_view": cats[0]["view"] if cats else None,
        # The step thread's phases (the attribution's host view), mean per step.
        "host_phases": [{"key": key, "label": label, "field": field,
                         "mean_ns": sum(r[field] for r in steps) / len(steps)} for field, label, key in PHASES["host"]]
        if steps else [],
        "step_categories": cats,
        # Loss, throughput and other training scalars per step (log_scalar, the trainer integrations).
        "training_metrics": dataset_rows(run, "training_metrics", Params()),
        "gpu": gpu_metrics(run.store, step),
        "data_loading": {"steps_ns": total, "data_loading_ns": loading,
                         "data_loading_pct": 100.0 * loading / total if total else None},
        "advisor": advisor if advisor is not None else {"available": False, "reason": "not computed",
                                                        "findings": []},
    }


def advisor_or_reason(run_dir: Path, signature: tuple, job: list[dict] | None = None) -> dict:
    """:func:`advisor_answer`, or why the advisor cannot load (the overview still shows everything else)."""
    try:
        return advisor_answer(run_dir, signature, job)
    except ImportError as exc:
        return {"available": False, "reason": f"the advisor cannot load: {exc}", "findings": []}


def advisor_key(signature: tuple, job: list[dict] | None) -> tuple:
    """What the advisor's answer for a run depends on: its tables, and its job's ranks' tables."""
    return ("advisor", signature, tuple((x["id"], tables_signature(x["dir"])) for x in job or []))


def advisor_answer(run_dir: Path, signature: tuple, job: list[dict] | None = None) -> dict:
    """The advisor's report of the run in ``run_dir`` (tables of ``signature``); among the ranks of a job
    (``job``: job_members), judged with the others (advise_outputs), so the slow rank's report names it and
    waiting in collectives is split. Reads its tables through its own connection: a long analysis does not
    hold the run's open store, which the run's other pages use meanwhile. Kept on disk (answer_cache)."""
    # Imported here: a page whose analysis cannot load says so; the others still work.
    from mlprof.analysis.advisor import advise
    from mlprof.tables.store import TableStore
    from mlprof.workflow import advise_outputs

    def compute() -> dict:
        mine = next((x["id"] for x in job or [] if x["dir"] == run_dir), None)
        if mine is not None:
            reports = advise_outputs([(x["id"], x["dir"]) for x in job])
            report = next(r for r in reports if r.source == mine)
        else:
            with TableStore(run_dir / TABLES_DIR) as store:
                report = advise(store)
        return {"available": True, **report.to_dict()}
    return cached_answer(run_dir, "advisor", advisor_key(signature, job), compute)


def dataset_rows(run: OpenRun, name: str, params: Params) -> list[dict]:
    return get_dataset(name).rows(run.store, params)


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
    w0 = index.window_start_ns if index.window_start_ns is not None else origin
    w1 = index.window_end_ns if index.window_end_ns is not None else (index.end_ns or origin)
    return {"origin_ns": str(origin), "span_ns": (index.end_ns or origin) - origin,
            "window": {"start": w0 - origin, "end": w1 - origin},
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


def timeline_range(run: OpenRun, t0_rel: int, t1_rel: int) -> dict:
    index = _index(run)
    origin = index.start_ns or 0
    if t1_rel <= t0_rel:
        raise ConfigError("t1 must be greater than t0")
    stats = timeline.range_stats(run.store, index, origin + t0_rel, origin + t1_rel)
    stats["t0"], stats["t1"] = t0_rel, t1_rel
    del stats["t0_ns"], stats["t1_ns"]
    return stats


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
    found = events.event_details(run.store, src, row_id, index.start_ns or 0)
    if found is not None:
        found["origin_ns"] = str(index.start_ns or 0)
    return found


def timeline_locate(run: OpenRun, src: int | None, row_id: int | None, name: str | None,
                    step: int | None) -> dict | None:
    """Where a slice is drawn (times relative to the origin): by (src, id), or the longest slice of a name
    (in one step when given), which is where an advisor's op evidence points."""
    index = _index(run)
    origin = index.start_ns or 0
    if src is not None and row_id is not None:
        found = timeline.locate(run.store, src, row_id)
    elif name:
        lo = hi = None
        if step is not None:
            got = run.store.rows("SELECT min(start_ns), max(end_ns) FROM steps WHERE step = ?", [step])
            lo, hi = got[0] if got else (None, None)
        found = timeline.slowest(run.store, name, lo, hi)
    else:
        raise ConfigError("locate needs src= and id=, or name=")
    if found is None:
        return None
    found["start"] = found.pop("start_ns") - origin
    found["end"] = found.pop("end_ns") - origin
    return found
