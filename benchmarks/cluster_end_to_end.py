"""`mlprof cluster` end to end at N ranks: every rank parsed (worker processes, or a local Dask cluster), then
the cross-rank analysis, with the time and the peak memory of each part.

The N ranks are raw captures copied from one real job (``SRC``: a folder of the ``*_mlprof`` captures of a
multi-rank `mlprof run`, e.g. ``torchrun --nproc_per_node=4 tests/analysis/straggler_job.py gc 2``), without
their parsed output, cycled, each with its own rank, world size, pid and worker name in its
``profiler_info.json`` (the trace inside is the real rank's). Per N and mode it runs, as a subprocess,

* local: ``mlprof cluster DIR --workers W --json``;
* dask: ``mlprof cluster DIR --scheduler ADDRESS --json`` against a ``distributed.LocalCluster`` of W worker
  processes started here (one thread each), so the workers parse;

and prints the wall time, the peak RSS of the command's process tree (local: the command and its worker
processes; dask: the client, with the Dask workers' peak RSS beside it), the ranks reported and the slow ranks.
The copies are made afresh (unparsed) for each mode.

    python benchmarks/cluster_end_to_end.py SRC --ranks 8 64 [--workers 2] [--modes local,dask]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from analyses_memory import TreeSampler  # noqa: E402

CAPTURE_SUFFIX = "_mlprof"
MANIFEST = "profiler_info.json"
PARSED = "mlprof_output"


def make_ranks(src: Path, n: int, dest: Path) -> None:
    """``n`` raw captures in ``dest``: the real ones cycled, renumbered, their parsed output left out."""
    real = sorted(p for p in src.iterdir() if p.name.endswith(CAPTURE_SUFFIX))
    if not real:
        raise SystemExit(f"{src}: no *{CAPTURE_SUFFIX} capture")
    real.sort(key=lambda p: json.loads((p / MANIFEST).read_text()).get("rank", 0))
    dest.mkdir(parents=True)
    for i in range(n):
        out = dest / f"vm_{100_000 + i}_rank{i:05d}{CAPTURE_SUFFIX}"
        shutil.copytree(real[i % len(real)], out, ignore=shutil.ignore_patterns(PARSED))
        manifest = json.loads((out / MANIFEST).read_text())
        manifest.update(rank=i, world_size=n, local_rank=i, pid=100_000 + i, worker_name=f"vm_{100_000 + i}")
        (out / MANIFEST).write_text(json.dumps(manifest))


def run_cluster(args: list[str], workers_pids: list[int] | None = None) -> dict:
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "mlprof", "cluster", *args, "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    sampler = TreeSampler(proc.pid, rss=True, interval_s=0.1)
    worker_samplers = [TreeSampler(pid, rss=True, interval_s=0.1) for pid in workers_pids or []]
    out, err = proc.communicate()
    row = {"wall_s": round(time.perf_counter() - started, 1), "peak_mib": round(sampler.stop() / 2**20),
           "exit": proc.returncode}
    if worker_samplers:
        row["workers_peak_mib"] = round(sum(s.stop() for s in worker_samplers) / 2**20)
    if proc.returncode:
        row["error"] = err.strip().splitlines()[-1] if err.strip() else ""
        return row
    report = json.loads(out)
    row["ranks"] = len(report["ranks"])
    row["failed"] = len(report["failed"])
    row["slow"] = [(s["rank"], s["cause"]) for s in report["slow_ranks"]]
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("src", type=Path, help="folder of the raw captures of one real multi-rank job")
    ap.add_argument("--ranks", type=int, nargs="+", default=[8, 64])
    ap.add_argument("--workers", type=int, default=2, help="worker processes (local) or Dask workers (default 2)")
    ap.add_argument("--modes", default="local,dask")
    args = ap.parse_args()
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    print(f"| ranks | mode | workers | wall (s) | peak RSS of the command (MiB) | Dask workers' peak RSS (MiB) "
          "| ranks reported | failed | slow ranks (rank, cause) |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|---|")
    for n in args.ranks:
        for mode in modes:
            with tempfile.TemporaryDirectory(prefix="mlprof-cluster-e2e-") as tmp:
                ranks = Path(tmp) / "ranks"
                make_ranks(args.src, n, ranks)
                if mode == "local":
                    row = run_cluster([str(ranks), "--workers", str(args.workers)])
                else:
                    import distributed

                    with distributed.LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True,
                                                  dashboard_address=None) as lc:
                        pids = [w.process.pid for w in lc.workers.values()]
                        row = run_cluster([str(ranks), "--scheduler", lc.scheduler_address], pids)
            print(f"| {n} | {mode} | {args.workers} | {row['wall_s']} | {row['peak_mib']} | "
                  f"{row.get('workers_peak_mib', '-')} | {row.get('ranks', '-')} | {row.get('failed', '-')} | "
                  f"{row.get('slow', row.get('error'))} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
