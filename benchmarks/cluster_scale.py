"""Time and peak memory of the cross-rank cluster analysis at N ranks, replicated from real ranks.

The per-rank work of ``mlprof cluster`` (parse, then :func:`mlprof.analysis.cluster_data.extract_rank`)
runs once per rank in worker processes and scales with the workers; what grows with N in the one
process that combines them is :func:`mlprof.analysis.cluster.combine` (matching every collective
instance across ranks, the slow ranks and their causes, arrivals, heatmap rows) and the report.

This extracts the ranks of one real job once (``SRC``: a folder of parsed ranks, e.g. a 4-rank
gloo job of tests/analysis/straggler_job.py under ``mlprof run``), then, for each N, builds N ranks by
cycling through them (rank i is a copy of real rank i mod k, renumbered, with its collectives' start
times shifted by a per-rank offset of 0-2 ms drawn with a fixed seed, so waits and arrival order vary),
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
from pathlib import Path


def _rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def replicate(real: list[dict], n: int, seed: int = 0) -> list[dict]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        r = copy.deepcopy(real[i % len(real)])
        shift = rng.randrange(0, 2_000_000)
        r["rank"], r["source"] = i, f"rank{i:05d}"
        r["identity"] = {**r["identity"], "rank": i, "world_size": n, "source": r["source"], "pid": 100_000 + i}
        for op in r["comm_ops"]:
            op["start_ns"] += shift
        out.append(r)
    return out


def measure(pickled: Path, n: int) -> dict:
    from mlprof.analysis.cluster import combine

    real = pickle.loads(pickled.read_bytes())
    base_kib = _rss_kib()
    ranks = replicate(real, n)
    t0 = time.perf_counter()
    report = combine(ranks)
    combine_s = time.perf_counter() - t0
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    text = json.dumps(report.to_dict(), default=str)
    return {"ranks": n, "combine_s": round(combine_s, 3), "peak_mib_over_start": round((peak_kib - base_kib) / 1024, 1),
            "report_mib": round(len(text) / 2**20, 2), "slow_ranks": len(report.slow_ranks),
            "comm_ops_per_rank": len(real[0]["comm_ops"])}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("src", type=Path, help="folder of the parsed ranks of one real job")
    ap.add_argument("--ranks", type=int, nargs="+", default=[8, 64, 256, 1024])
    ap.add_argument("--child", nargs=2, metavar=("PICKLE", "N"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(measure(Path(args.child[0]), int(args.child[1]))))
        return 0
    from mlprof.cluster_workflow import extract_ranks

    t0 = time.perf_counter()
    real = extract_ranks(args.src, workers=1)
    print(f"extracted {len(real)} real ranks in {time.perf_counter() - t0:.2f} s", file=sys.stderr)
    with tempfile.TemporaryDirectory() as tmp:
        pickled = Path(tmp) / "ranks.pkl"
        pickled.write_bytes(pickle.dumps(real))
        print("| ranks | combine (s) | peak memory over start (MiB) | report JSON (MiB) |")
        print("|---:|---:|---:|---:|")
        for n in args.ranks:
            res = subprocess.run([sys.executable, __file__, str(args.src), "--child", str(pickled), str(n)],
                                 capture_output=True, text=True, check=True)
            row = json.loads(res.stdout)
            print(f"| {n} | {row['combine_s']} | {row['peak_mib_over_start']} | {row['report_mib']} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
