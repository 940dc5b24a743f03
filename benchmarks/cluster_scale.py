"""Time and peak memory of the cross-rank cluster analysis at N ranks, replicated from real ranks.

The per-rank work of ``mlprof cluster`` (parse, then :func:`mlprof.analysis.cluster_data.extract_rank`)
runs once per rank in worker processes and scales with the workers; what grows with N in the one
process that combines them is :func:`mlprof.analysis.cluster.combine` (matching every collective
instance across ranks, the slow ranks and their causes, arrivals, heatmap rows) and the report.

This extracts the ranks of one real job once (``SRC``: a folder of parsed ranks, e.g. a 4-rank
gloo job of tests/analysis/straggler_job.py under ``mlprof run``), then, for each N, builds N ranks:
copies of the real ranks that are not slow, cycled, and one copy of the slow rank at rank N/2, each
renumbered, with its collectives' start times shifted by a per-rank offset of 0-2 ms drawn with a
fixed seed, so waits and arrival order vary; ``--op-copies K`` repeats each rank's collectives K
times, shifted in time, for jobs that issue more collectives,
and in a fresh process per N measures ``combine`` (wall time) and the process's peak RSS (ru_maxrss)
less its RSS before the ranks were built, plus the size of the report as JSON.

    python benchmarks/cluster_scale.py SRC --ranks 8 64 256 1024
"""

from __future__ import annotations

import argparse
import copy
import json
import pickle
import random
import resource
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path


def more_ops(real: list[dict], copies: int) -> list[dict]:
    """Each rank's collectives ``copies`` times (copy j shifted by j spans of the rank's ops, steps renumbered):
    a job that issues ``copies`` times as many collectives per step-window."""
    if copies <= 1:
        return real
    out = []
    for r in real:
        ops = r["comm_ops"]
        lo, hi = min(o["start_ns"] for o in ops), max(o["start_ns"] + o["dur_ns"] for o in ops)
        top = max((o["step"] or 0) for o in ops) + 1
        grown = [{**o, "start_ns": o["start_ns"] + j * (hi - lo + 1), "step": None if o["step"] is None
                  else o["step"] + j * top} for j in range(copies) for o in ops]
        out.append({**r, "comm_ops": grown})
    return out


def replicate(real: list[dict], n: int, seed: int = 0) -> list[dict]:
    """N ranks: copies of the real job's ranks that are not slow, and one copy of its slow rank (rank N/2)."""
    from mlprof.analysis.cluster import combine

    slow = {s.source for s in combine(real).slow_ranks}
    fast = [r for r in real if r["source"] not in slow] or real
    rng = random.Random(seed)
    out = []
    for i in range(n):
        src = next(r for r in real if r["source"] in slow) if slow and i == n // 2 else fast[i % len(fast)]
        r = copy.deepcopy(src)
        shift = rng.randrange(0, 2_000_000)
        r["rank"], r["source"] = i, f"rank{i:05d}"
        r["identity"] = {**r["identity"], "rank": i, "world_size": n, "source": r["source"], "pid": 100_000 + i}
        for op in r["comm_ops"]:
            op["start_ns"] += shift
        out.append(r)
    return out


def measure(pickled: Path, n: int, copies: int) -> dict:
    from mlprof.analysis.cluster import combine

    real = more_ops(pickle.loads(pickled.read_bytes()), copies)
    ranks = replicate(real, n)
    t0 = time.perf_counter()
    report = combine(ranks)
    combine_s = time.perf_counter() - t0
    text = json.dumps(report.to_dict(), default=str)
    del report, text
    # Memory on a second pass, traced (tracemalloc slows it): the ranks' data, then combine's peak on top.
    ranks = None
    tracemalloc.start()
    ranks = replicate(real, n)
    data_b = tracemalloc.get_traced_memory()[0]
    tracemalloc.reset_peak()
    report = combine(ranks)
    text = json.dumps(report.to_dict(), default=str)
    peak_b = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return {"ranks": n, "combine_s": round(combine_s, 3), "rank_data_mib": round(data_b / 2**20, 1),
            "combine_peak_mib": round((peak_b - data_b) / 2**20, 1), "report_mib": round(len(text) / 2**20, 2),
            "slow_ranks": [s.rank for s in report.slow_ranks], "comm_ops_per_rank": len(real[0]["comm_ops"]),
            "max_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("src", type=Path, help="folder of the parsed ranks of one real job")
    ap.add_argument("--ranks", type=int, nargs="+", default=[8, 64, 256, 1024])
    ap.add_argument("--op-copies", type=int, default=1,
                    help="repeat each rank's collectives this many times (more collectives per rank)")
    ap.add_argument("--child", nargs=2, metavar=("PICKLE", "N"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(measure(Path(args.child[0]), int(args.child[1]), args.op_copies)))
        return 0
    from mlprof.cluster_workflow import extract_ranks

    t0 = time.perf_counter()
    real = extract_ranks(args.src, workers=1)
    print(f"extracted {len(real)} real ranks in {time.perf_counter() - t0:.2f} s", file=sys.stderr)
    with tempfile.TemporaryDirectory() as tmp:
        pickled = Path(tmp) / "ranks.pkl"
        pickled.write_bytes(pickle.dumps(real))
        print("| ranks | collectives per rank | combine (s) | ranks' data (MiB) | combine's peak on top (MiB) | report JSON (MiB) "
              "| process max RSS (MiB) | slow ranks |")
        print("|---:|---:|---:|---:|---:|---:|---:|---|")
        for n in args.ranks:
            res = subprocess.run([sys.executable, __file__, str(args.src), "--op-copies", str(args.op_copies),
                                  "--child", str(pickled), str(n)],
                                 capture_output=True, text=True, check=True)
            row = json.loads(res.stdout)
            print(f"| {n} | {row['comm_ops_per_rank']} | {row['combine_s']} | {row['rank_data_mib']} | {row['combine_peak_mib']} | "
                  f"{row['report_mib']} | {row['max_rss_mib']} | {row['slow_ranks']} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
