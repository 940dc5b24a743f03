"""The cluster page's answer: ``mlprof.analysis.cluster`` over the ranks beside a run, plus the
run id of each rank (the page links ranks to their runs) and a communication matrix for CPU backends.

The cluster analysis's matrix comes from device collectives (NCCL kernels
with their group metadata). Gloo runs have none: their collectives are host
ops (``gloo:all_reduce``) whose message size comes from recorded input shapes
and whose peers are the process group's ranks in ``distributedInfo``. Those
are matched here the same way, as bytes per (source, destination, collective).
"""

from __future__ import annotations

from pathlib import Path

from mlprof.analysis.cluster_views import cluster_views
from mlprof.capture.layout import OUTPUT_DIR
from mlprof.errors import ConfigError
from mlprof.tables.store import TableStore
from mlprof.ui.discovery import discover
from mlprof.tables.layout import TABLES_DIR

__all__ = ["cluster_members", "cluster_answer", "cluster_rows", "CLUSTER_SECTIONS", "folder_of"]

CLUSTER_SECTIONS = ("ranks", "step_rows", "slow_ranks", "collectives", "matrix", "arrivals", "skew_rows")
# Where a slow rank's excess lies (``excess_in``) -> what its figures measure, in words and as the ranks table's column.
SLOW_RANK_MEASURES = {"compute": "compute", "communication": "communication transit (waits left out)",
                      "free": "device idle"}
SLOW_RANK_FIELDS = {"compute": "compute_ns", "communication": "transit_ns", "free": "free_ns"}


def folder_of(run_id: str) -> str:
    """The folder a run's capture or trace sits in: <folder>/<capture>/mlprof_output or <folder>/<trace>_mlprof_output."""
    parts = run_id.split("/")
    return "/".join(parts[:-2] if parts[-1] == OUTPUT_DIR else parts[:-1])


def cluster_members(logdir: Path, run_id: str) -> list[str]:
    """The runs of one job: parsed runs whose capture or trace sits in the same folder as ``run_id``'s."""
    mine = folder_of(run_id)
    return [r.id for r in discover(logdir).runs if folder_of(r.id) == mine]


def _group_ranks(out_dir: Path) -> tuple[list[int], str]:
    """Ranks of the run's default process group (all ranks when the trace does not list them), and its name."""
    with TableStore(out_dir / TABLES_DIR) as store:
        info = store.meta("distributedInfo", {})
    if not isinstance(info, dict):
        return [], ""
    for pg in info.get("pg_config") or []:
        if isinstance(pg, dict) and isinstance(pg.get("ranks"), list):
            return [r for r in pg["ranks"] if isinstance(r, int)], str(pg.get("pg_desc") or pg.get("pg_name") or "")
    world = info.get("world_size")
    return (list(range(world)) if isinstance(world, int) else []), ""


def host_matrix(ranks: list[dict], out_dirs: dict[str, Path]) -> list[dict]:
    """Matrix rows of host-side collectives: each rank's messages to every other rank of its group."""
    rows = []
    for r in ranks:
        if r.get("comm_kind") != "host" or r["rank"] is None or not r["comm_ops"]:
            continue
        peers, group = _group_ranks(out_dirs[r["source"]])
        by_name: dict[str, dict] = {}
        for op in r["comm_ops"]:
            c = by_name.setdefault(op["name"], {"count": 0, "size_bytes": 0, "time_ns": 0, "known": True})
            c["count"] += 1
            c["time_ns"] += op["dur_ns"]
            if op.get("size_bytes") is None:
                c["known"] = False
            else:
                c["size_bytes"] += op["size_bytes"]
        for name, c in sorted(by_name.items()):
            size = c["size_bytes"] if c["known"] else None
            for dst in peers:
                if dst != r["rank"]:
                    rows.append({"src_rank": r["rank"], "dst_rank": dst, "collective": name, "group": group,
                                 "count": c["count"], "size_bytes": size, "time_ns": c["time_ns"],
                                 "bandwidth_gb_per_s": round(size / c["time_ns"], 4) if size and c["time_ns"] else None,
                                 "measured_on": "host"})
    return rows


def cluster_answer(logdir: Path, run_dirs: dict[str, Path]) -> dict:
    """Cluster report over the ranks among ``run_dirs`` (run id -> output dir); runs without a rank are left out."""
    from mlprof.analysis.cluster import combine
    from mlprof.cluster_workflow import rank_data

    ranks = [rank_data(path, source=run_id) for run_id, path in run_dirs.items()]
    with_rank = [r for r in ranks if r["rank"] is not None]
    if len(with_rank) < 2:
        return {"available": False, "members": list(run_dirs),
                "reason": f"{len(with_rank)} run(s) with a rank in this folder; the cluster view needs the "
                          "captures or traces of at least 2 ranks side by side in one folder"}
    report = combine(with_rank).to_dict()
    for slow in report["slow_ranks"]:
        # What value_ns and median_ns measure: a "communication" cause compares transit (time on the wire,
        # the waits for late ranks left out), not the ranks table's communication column (167 vs 103 ms
        # read as communication where that column said 190 vs 198 ms).
        excess_in = slow.get("excess_in", slow.get("cause"))
        slow.setdefault("measure", SLOW_RANK_MEASURES.get(excess_in, excess_in))
        slow.setdefault("measure_field", SLOW_RANK_FIELDS.get(excess_in))
    if not report["matrix"]:
        report["matrix"] = host_matrix(with_rank, run_dirs)
    report["views"] = cluster_views(report)
    run_of_rank = {r["rank"]: r["source"] for r in with_rank}
    return {"available": True, "members": [r["source"] for r in with_rank], "run_of_rank": run_of_rank,
            "comm_kind": sorted({r["comm_kind"] for r in with_rank}), **report}


def cluster_rows(answer: dict, section: str) -> list[dict]:
    if section not in CLUSTER_SECTIONS:
        raise ConfigError(f"{section!r}: no such cluster section ({', '.join(CLUSTER_SECTIONS)})")
    return list(answer.get(section, [])) if answer["available"] else []
